import type { JobStatus } from '../interfaces/job.interface.js';
import type { InstanceRecord } from '../store/instance.store.js';
import { AHEAD_CAP } from '../store/wait.sql.js';

/** Which gate holds a job (README: "Why a job is not running"). */
export type WaitGate =
  | 'finished'
  | 'running'
  | 'read-ahead'
  | 'parents'
  | 'successor'
  | 'scheduled'
  | 'retry'
  | 'snoozed'
  | 'sleeping'
  | 'paused'
  | 'unserved'
  | 'global-concurrency'
  | 'concurrency-key'
  | 'rate-limit'
  | 'ready';

export interface WaitReason {
  gate: WaitGate;
  /** The gate in words, with what it waits for ("due at 2026-12-02T10:00:00.000Z (in 4m 10s)"). */
  reason: string;
}

/** What whyNotRunning(id) says: every gate that holds the job now, in the order a worker meets them. */
export interface WaitExplanation {
  id: string;
  queue: string;
  status: JobStatus;
  reasons: WaitReason[];
}

/** One job's facts (store/wait.sql.ts jobWaitFacts). */
export interface WaitFacts {
  id: string;
  queue_name: string;
  status: JobStatus;
  buffered: boolean;
  locked_by: string | null;
  run_at: Date;
  attempts: number;
  max_attempts: number;
  last_error: string | null;
  concurrency_key: string | null;
  /** The job's flow (a blocked job of no flow waits as a successor: onConflict 'queue-after'). */
  flow_id: string | null;
  ever_claimed: boolean;
  /** The name of the durable sleep (job.sleep()) the job is in: the last step it recorded, its `until` ahead. */
  sleeping: string | null;
  due_in_ms: number;
  paused: boolean;
  limited_running: number;
  limited_by_worker: { worker: string; n: number }[];
  key_holders: string[];
  open_parents: { id: string; ref: string | null; status: JobStatus }[];
  /** onConflict 'queue-after': a waiting successor (blocked, of no flow) and the live holder of its key it waits for. */
  successor_of: { id: string; status: JobStatus; buffered: boolean } | null;
  /** The queue has LIFO jobs (background_queues.lifo_jobs): `ahead` counts in that claim's order (LIFO jobs first). */
  lifo_order: boolean;
  ahead: number;
}

/** The rate window of the job's queue, read when a live instance says the queue has a rate limit. */
export interface RateWindow {
  started: number;
  freesInMs: number | null;
}

/** The limits the job's queue runs under, as the live instances that serve it registered them. */
export function queueLimitsOf(queue: string, instances: readonly InstanceRecord[]) {
  for (const instance of instances) {
    if (!instance.live) continue;
    const entry = instance.queues.find((q) => q.queue === queue);
    if (entry) return { served: true, limits: entry.limits ?? {} };
  }
  return { served: false, limits: {} };
}

const ms = (n: number) => {
  const s = Math.max(0, Math.round(n / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  return m < 60 ? `${m}m ${s % 60}s` : `${Math.floor(m / 60)}h ${m % 60}m`;
};
const quote = (s: string) => JSON.stringify(s);

/**
 * Every gate that holds the job, in words: what a worker would meet on its way to starting it. A queued job that
 * nothing holds gets one reason, 'ready', with how many due jobs are ahead of it in the claim's order.
 */
export function waitReasons(f: WaitFacts, instances: readonly InstanceRecord[], rate: RateWindow | undefined, now: Date): WaitReason[] {
  if (f.status === 'completed' || f.status === 'failed' || f.status === 'cancelled') {
    return [{ gate: 'finished', reason: `it ${f.status === 'completed' ? 'completed' : f.status === 'failed' ? 'failed for good (a dead letter)' : 'was cancelled'}: it will not run again${f.status === 'completed' ? '' : ' unless retried (retry(id))'}` }];
  }
  if (f.status === 'processing' && !f.buffered) return [{ gate: 'running', reason: `it is running on instance ${f.locked_by ?? '?'} (attempt ${f.attempts} of ${f.max_attempts})` }];
  if (f.status === 'processing') {
    return [{ gate: 'read-ahead', reason: `read ahead by instance ${f.locked_by ?? '?'} and not started: it starts when a slot there frees up, or goes back to the queue when its short lease lapses` }];
  }
  // A blocked job of no flow is a successor waiting for its key's holder (onConflict 'queue-after').
  if (f.status === 'blocked' && f.flow_id === null) {
    const h = f.successor_of;
    const holder = h === null ? 'no job holds its key any more: it starts at the next look (the sweeper\'s at the latest)' : `job ${h.id}, ${h.status === 'processing' && !h.buffered ? 'running' : 'queued'}`;
    return [{ gate: 'successor', reason: `waiting for the job that holds its unique key to end (onConflict 'queue-after'): ${holder}` }];
  }
  if (f.status === 'blocked') {
    const parents = f.open_parents.map((p) => `job ${p.id}${p.ref ? ` (${p.ref})` : ''}, ${p.status}`).join('; ');
    return [{ gate: 'parents', reason: `waiting on its parents in its flow: ${parents || 'none open (the sweeper unblocks it)'}` }];
  }
  const reasons: WaitReason[] = [];
  const due = f.due_in_ms > 0;
  if (due) {
    const when = `${new Date(now.getTime() + f.due_in_ms).toISOString()} (in ${ms(f.due_in_ms)})`;
    if (f.attempts > 0 && f.last_error !== null) reasons.push({ gate: 'retry', reason: `a retry after attempt ${f.attempts} of ${f.max_attempts} failed: due at ${when}` });
    else if (f.sleeping !== null) reasons.push({ gate: 'sleeping', reason: `in its durable sleep ${quote(f.sleeping)} (job.sleep()) until ${when}; the handler runs again then and goes on after the sleep` });
    else if (f.ever_claimed) reasons.push({ gate: 'snoozed', reason: `snoozed (or put back) until ${when}` });
    else reasons.push({ gate: 'scheduled', reason: `due at ${when}` });
  }
  if (f.paused) {
    reasons.push({
      gate: 'paused',
      reason: `queue ${quote(f.queue_name)} is paused: resume it with the Resume button on the queue's page of the dashboard (or its overview), \`pg-queue resume ${f.queue_name}\`, or QueueService.resume()`,
    });
  }
  const { served, limits } = queueLimitsOf(f.queue_name, instances);
  if (!served) {
    reasons.push({
      gate: 'unserved',
      reason: instances.length === 0 ? `no instance has registered (none runs workers, or they predate the registry)` : `no live instance serves queue ${quote(f.queue_name)} (none has a handler for it with workers on)`,
    });
  }
  if (limits.globalConcurrency !== undefined && f.limited_running >= limits.globalConcurrency) {
    const where = f.limited_by_worker.map((w) => `${w.worker} ×${w.n}`).join(', ');
    reasons.push({ gate: 'global-concurrency', reason: `queue ${quote(f.queue_name)} is at its globalConcurrency: ${f.limited_running} of ${limits.globalConcurrency} running (${where})` });
  }
  if (limits.concurrencyPerKey !== undefined && f.concurrency_key !== null && f.key_holders.length >= limits.concurrencyPerKey) {
    reasons.push({ gate: 'concurrency-key', reason: `its concurrency key ${quote(f.concurrency_key)} is busy: job${f.key_holders.length === 1 ? '' : 's'} ${f.key_holders.join(', ')} run${f.key_holders.length === 1 ? 's' : ''} with it (concurrencyPerKey ${limits.concurrencyPerKey})` });
  }
  if (limits.rateLimit && rate && rate.started >= limits.rateLimit.max) {
    const until = rate.freesInMs === null ? 'soon' : `${new Date(now.getTime() + rate.freesInMs).toISOString()} (in ${ms(rate.freesInMs)})`;
    reasons.push({ gate: 'rate-limit', reason: `the rate window is full: ${rate.started} of ${limits.rateLimit.max} starts in ${ms(limits.rateLimit.intervalMs)}, until ${until}` });
  }
  if (reasons.length === 0) {
    const ahead = f.ahead >= AHEAD_CAP ? `at least ${AHEAD_CAP}` : String(f.ahead);
    reasons.push({ gate: 'ready', reason: `due, and nothing holds it: ${ahead} due job(s) ahead of it in queue ${quote(f.queue_name)}${f.lifo_order ? ' (LIFO jobs first, newest first)' : ''}; a worker starts it when it reaches them` });
  }
  return reasons;
}
