import type { QueueInternals } from '../metrics/queue-internals.js';
import { errorLine } from '../utils/error-text.js';
import type { ClaimLoopReport } from '../worker/worker-pool.js';
import type { EventLoopLag } from './event-loop-lag.js';

/** Why this process is not ready (readiness's message, the `pg_queue_unready` metric's `reason` label). */
export type UnreadyReason = 'claim-stalled' | 'event-loop-lag' | 'listener-down';

export interface Unready {
  reason: UnreadyReason;
  /** The queue, for claim-stalled. */
  queue?: string;
  message: string;
}

/** What this process's progress is, read for a probe or a scrape (readProgress). */
export interface ProgressReport {
  /** Empty: ready, as far as progress goes. */
  unready: Unready[];
  /** The worst event loop lag of the last few seconds (EventLoopLag.worstMs). */
  eventLoopLagMs: number;
  /** Per queue this process serves: ms since one of its claims last answered. */
  sinceClaimMs: Record<string, number>;
}

/**
 * The queues whose claims are stalled: due jobs (`due`), slots with no job in them, no limit holding the loop back on
 * purpose, and no claim answered for more than `afterMs`. Pure: the caller reads the loops and the database.
 */
export function stalledLoops(loops: readonly ClaimLoopReport[], due: (queue: string) => boolean, afterMs: number): ClaimLoopReport[] {
  return loops.filter((l) => l.sinceAnswerMs > afterMs && l.idleSlots > 0 && !l.held && due(l.queue));
}

/**
 * This process's progress in one database: stalled claim loops, the event loop's lag, the LISTEN connection. The
 * database is read (which queues have due jobs, by its clock) only when some loop has not answered for the bound, so
 * a healthy probe costs no statement; when that read fails, every such queue counts as due (readiness is down anyway,
 * by its database check).
 */
export async function readProgress(internals: QueueInternals, lag: EventLoopLag, timeoutMs: number): Promise<ProgressReport> {
  const { claimStalledAfterMs, maxEventLoopLagMs } = internals.options.health;
  const loops = internals.options.workers ? internals.workers.claimLoops() : [];
  const unready: Unready[] = [];
  const late = loops.filter((l) => l.sinceAnswerMs > claimStalledAfterMs);
  if (late.length > 0) {
    let due: (queue: string) => boolean;
    let unknown = '';
    try {
      const oldest = await internals.store.oldestDue(timeoutMs);
      due = (queue) => (oldest[queue] ?? 0) > 0;
    } catch (error) {
      unknown = ` (due jobs unknown: ${errorLine(error)})`;
      due = () => true;
    }
    for (const l of stalledLoops(late, due, claimStalledAfterMs)) {
      const message = `queue "${l.queue}" has due jobs and ${l.idleSlots} idle slot(s), and no claim has answered for ${Math.round(l.sinceAnswerMs)} ms (claimStalledAfterMs ${claimStalledAfterMs})${unknown}`;
      unready.push({ reason: 'claim-stalled', queue: l.queue, message });
    }
  }
  const eventLoopLagMs = lag.worstMs();
  if (eventLoopLagMs > maxEventLoopLagMs) {
    unready.push({ reason: 'event-loop-lag', message: `the event loop lagged ${eventLoopLagMs} ms within the last seconds (maxEventLoopLagMs ${maxEventLoopLagMs})` });
  }
  if (loops.length > 0 && !internals.workers.listening) {
    unready.push({ reason: 'listener-down', message: 'the LISTEN connection is down (reconnecting): the poll is the only wake-up' });
  }
  return { unready, eventLoopLagMs, sinceClaimMs: Object.fromEntries(loops.map((l) => [l.queue, Math.round(l.sinceAnswerMs)])) };
}
