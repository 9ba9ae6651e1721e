import type { Pool, QueryResultRow } from 'pg';
import { Statements } from './statements.js';
import { INSTANCE_SQL } from './instance.sql.js';

/** One queue as an instance registers it. */
export interface InstanceQueue {
  queue: string;
  concurrency: number;
  /** Jobs running in that process when it last wrote its row (read ahead and not started: not counted). */
  running: number;
  /** The queue's limits across instances, as its handler sets them (absent: none). */
  limits?: { globalConcurrency?: number; rateLimit?: { max: number; intervalMs: number }; concurrencyPerKey?: number };
  /**
   * Progress, when the row was written (absent from versions before it): ms since one of the queue's claims last
   * answered (measured in the process; add the row's age for now), its slots with no job in them, whether a limit
   * held its claims back on purpose, and the instance's `health.claimStalledAfterMs`.
   */
  sinceClaimMs?: number;
  idleSlots?: number;
  claimHeld?: boolean;
  stalledAfterMs?: number;
}

/** A process that runs workers, as its row in background_instances says (README: "Instances"). */
export interface InstanceRecord {
  /** Its workerId (the `locked_by` of the jobs it runs). */
  id: string;
  host: string;
  pid: number;
  queues: InstanceQueue[];
  startedAt: Date;
  lastSeenAt: Date;
  /** It wrote its row within its expiry (leaseMs + heartbeatMs); false: it died, froze or lost the database. */
  live: boolean;
  /** How long ago it last wrote its row, by the database clock. */
  seenMsAgo: number;
}

interface InstanceRow {
  id: string;
  host: string;
  pid: number;
  queues: InstanceQueue[];
  started_at: Date;
  last_seen_at: Date;
  live: boolean;
  seen_ms_ago: number;
}

/** Most instances a list returns (the dashboard's page, `instances()`, the CLI). */
export const INSTANCE_LIST_CAP = 500;

/** The instances registry's table access, one method per statement of instance.sql.ts, on the queue's own pool. */
export class InstanceStore {
  private readonly statements: Statements<typeof INSTANCE_SQL>;

  constructor(
    pool: Pool,
    options: { transactionPooler?: boolean } = {},
  ) {
    this.statements = new Statements(pool, INSTANCE_SQL, 'pgq_instance_', options);
  }

  private run<R extends QueryResultRow>(name: keyof typeof INSTANCE_SQL, values: unknown[]): Promise<R[]> {
    return this.statements.rows<R>(name, values);
  }

  async register(id: string, host: string, pid: number, queues: InstanceQueue[], expiresInMs: number): Promise<void> {
    await this.run('register', [id, host, pid, JSON.stringify(queues), expiresInMs]);
  }

  async deregister(id: string): Promise<void> {
    await this.run('deregister', [id]);
  }

  async list(limit = INSTANCE_LIST_CAP): Promise<InstanceRecord[]> {
    const rows = await this.run<InstanceRow>('list', [limit]);
    return rows.map((r) => ({ id: r.id, host: r.host, pid: r.pid, queues: r.queues, startedAt: r.started_at, lastSeenAt: r.last_seen_at, live: r.live, seenMsAgo: Math.max(0, Math.round(r.seen_ms_ago)) }));
  }

  /** Deletes the rows that expired more than `afterMs` ago; returns how many. */
  async forgetExpired(afterMs: number): Promise<number> {
    return (await this.statements.result('forgetExpired', [afterMs])).rowCount ?? 0;
  }
}

/**
 * Of the queues `due` (queues with jobs waiting), those that no live instance serves. An empty registry says
 * nothing: instances of versions before the registry, still running through a rolling upgrade, run unseen, so
 * none is named until some instance has registered (live, or gone within the hour the sweeper keeps its row).
 */
export function unservedQueues(due: readonly string[], instances: readonly InstanceRecord[]): string[] {
  if (instances.length === 0) return [];
  const served = new Set(instances.filter((i) => i.live).flatMap((i) => i.queues.map((q) => q.queue)));
  return due.filter((queue) => !served.has(queue));
}

/** A live instance whose claims of a queue with due jobs have not answered for its bound (stalledInstances). */
export interface StalledInstanceQueue {
  id: string;
  queue: string;
  /** ms since one of its claims of the queue answered, now (as of its row, plus the row's age by the database clock). */
  sinceClaimMs: number;
  stalledAfterMs: number;
}

/**
 * Live instances that serve a queue of `due` (queues with due jobs) with idle slots, no limit holding their claims
 * back, and no claim answered for longer than their own `health.claimStalledAfterMs`: alive (writing their row) but
 * not claiming, a wedged claim loop. Rows of versions that do not write progress are never named.
 */
export function stalledInstances(due: readonly string[], instances: readonly InstanceRecord[]): StalledInstanceQueue[] {
  const dueSet = new Set(due);
  const stalled: StalledInstanceQueue[] = [];
  for (const i of instances) {
    if (!i.live) continue;
    for (const q of i.queues) {
      if (!dueSet.has(q.queue) || q.sinceClaimMs === undefined || q.stalledAfterMs === undefined || q.claimHeld || !q.idleSlots) continue;
      const sinceClaimMs = q.sinceClaimMs + i.seenMsAgo;
      if (sinceClaimMs > q.stalledAfterMs) stalled.push({ id: i.id, queue: q.queue, sinceClaimMs, stalledAfterMs: q.stalledAfterMs });
    }
  }
  return stalled;
}
