// The simulation's plan (issue 40): everything that is random in a run comes from one seed, through one PRNG,
// in one fixed order, so that a seed names one plan: the processes and their options, the workload, the operator
// actions and the faults with their moments. Only the timing of what then happens varies from run to run (the
// machine decides it); what actually happened is recorded in the tables, never inferred from the plan.
import type { JobHandlerOptions } from '../../src/index.js';

/** mulberry32: small, fast, good enough for test plans; the same seed gives the same sequence everywhere. */
export class Prng {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0;
  }
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  }
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)];
  }
  /** A key of `weights`, each drawn in proportion to its weight. */
  weighted<K extends string>(weights: Record<K, number>): K {
    const entries = Object.entries(weights) as [K, number][];
    let r = this.next() * entries.reduce((sum, [, w]) => sum + w, 0);
    for (const [key, w] of entries) {
      r -= w;
      if (r < 0) return key;
    }
    return entries[entries.length - 1][0];
  }
}

/** The queues every process serves. */
export const SIM_QUEUES = ['sim', 'flow', 'undo', 'prio'] as const;
/** The limited queues (the same limits in every process): `lim` with a global concurrency, `keyed` one per key. */
export const LIMITED_QUEUES = ['lim', 'keyed'] as const;
/** Queues of handler kinds (same kind in every process): `batch` a batch handler, `txq` a transactional one, `cpu` a thread handler. */
export const HANDLER_KIND_QUEUES = ['batch', 'txq', 'cpu'] as const;
/** Queue `rated`: a rate limit, the same in every process. */
export const RATED_QUEUE = 'rated';
/** Queue `fair`: fair share across keys f1..f4 (f1 of weight 3), a per-key cap in some seeds, the same in every process. */
export const FAIR_QUEUE = 'fair';
export type SimQueue = (typeof SIM_QUEUES)[number] | (typeof LIMITED_QUEUES)[number] | (typeof HANDLER_KIND_QUEUES)[number] | typeof RATED_QUEUE | typeof FAIR_QUEUE;

/** What a handler does, from its payload (sim-worker.ts). */
export type Behaviour =
  | 'ok' // sleeps `ms`, honouring its signal
  | 'throw' // throws an Error
  | 'junk' // throws something that is not an Error
  | 'timeout' // sleeps past the queue's timeout, honouring the signal
  | 'hang' // ignores its signal, returns after `ms` (long)
  | 'snooze' // a durable sleep (job.sleep of 200 ms), then its work
  | 'block' // blocks the event loop for `ms`
  | 'write' // writes a row of sim_app in its own statement
  | 'step' // two durable steps, throws on its first attempt after the first step
  | 'spawn' // (flow jobs) spawns children, one holding a unique key that may be held already
  | 'ratelimited'; // (queue lim) RateLimitedError(ms) on its first run: the queue starts nothing for ms in any process

export interface SimPayload {
  b: Behaviour;
  ms: number;
  /** A nonce: every planned job is distinct; `v` changes with a replace. */
  n: number;
  v?: number;
  /** spawn: the unique key its child takes. */
  key?: string;
  /** A job of queue `batch`: how the handler settles it (`none`: by the call's outcome; `throw-call`: the call throws). */
  how?: BatchHow;
}

export type BatchHow = 'complete' | 'fail' | 'snooze' | 'none' | 'throw-call';

/** The options one process runs with (given to WorkerFleet as its `queue` options). */
export interface ProcessPlan {
  slot: string;
  leaseMs: number;
  poolSize: number;
  shutdownGraceMs: number;
  sweepIntervalMs: number;
  /** How often the recurring scheduler scans at least (the schedule `tick` fires every second in every process). */
  recurringPollMs?: number;
  queues: Partial<Record<SimQueue, JobHandlerOptions>>;
  /** job.log()'s bounds (the same in every process: SimPlan.logs). */
  jobLogs?: SimPlan['logs'];
  /** 0: the process deletes each plain job it completes, at its completion (maintenance.completedRetentionMs 0). */
  completedRetentionMs?: 0;
  /** Partitioned history (maintenance.history): finished jobs move out of background_jobs after `moveAfterMs`. */
  history?: SimPlan['history'];
}

export type EnqueueKind = 'single' | 'bulk' | 'tx-commit' | 'tx-rollback' | 'unique' | 'delayed' | 'priority' | 'flow' | 'sql' | 'limited' | 'batch' | 'tx-handler' | 'rated' | 'wait' | 'fair' | 'thread';
export type OperatorKind = 'bulk-cancel' | 'cancel' | 'retry' | 'bulk-retry' | 'replace' | 'pause-resume' | 'prune' | 'close' | 'priority-probe' | 'lock-wait' | 'change' | 'weights' | 'limits' | 'add-job' | 'schedule-edit' | 'history-move';
export type FaultKind = 'kill' | 'stop' | 'cut' | 'blackhole' | 'restart' | 'stall';

export interface FlowPlan {
  shape: 'chain' | 'fan' | 'diamond' | 'saga';
  policy: 'fail' | 'cancel' | 'continue';
  jobs: { ref: string; payload: SimPayload; dependsOn: string[]; compensate: boolean }[];
}

export interface PlannedJob {
  payload: SimPayload;
  priority: number;
  delayMs: number;
  key?: string;
  onConflict?: 'keep' | 'replace' | 'keep-run-at' | 'queue-after';
  /** Enqueued with `lifo: true` (issue 43): claimed before the queue's FIFO jobs of its priority. */
  lifo?: boolean;
  /** limited jobs: their queue and key. */
  queue?: SimQueue;
  concurrencyKey?: string;
}

export type Step =
  | { at: number; type: 'enqueue'; kind: EnqueueKind; jobs: PlannedJob[]; flow?: FlowPlan }
  | { at: number; type: 'operator'; kind: OperatorKind; pick: number; holdMs: number }
  | { at: number; type: 'fault'; kind: FaultKind; target: number; holdMs: number };

export interface SimPlan {
  seed: number;
  minutes: number;
  /** The enqueuing process first (slot 'e', never faulted), then the workers. */
  processes: ProcessPlan[];
  steps: Step[];
  /** Partitioned history in every process (40 % of the runs; addHistory), or none. */
  history?: { moveAfterMs: number; moveIntervalMs: number };
  /** How many unique keys the workload draws from: small, so that keys collide. */
  keys: number;
  /** The global concurrency of queue `lim` (every process has it). */
  globalConcurrency: number;
  /** The rate limit of queue `rated` (every process has it). */
  rateLimit: { max: number; intervalMs: number };
  /** Queue `fair`: its per-key cap (undefined: none) and its slots in all processes together. */
  fair: { perKey: number | undefined; slots: number };
  /** The processes reach PostgreSQL through PgBouncer in transaction mode (LISTEN on a direct connection). */
  pgbouncer: boolean;
  /** job.log()'s bounds in every process (the module's jobLogs): small, so that the bounds drop and cut lines. */
  logs: { maxLines: number; maxLineLength: number };
  /** The runtime schedule `every` (issue 43), into queue `tick`: its interval, limit, and start and end after the processes started. */
  every: EveryPlan;
  /** The event stream (issue 43): the queues that record events (recordEvents before the processes start), and after how many events the run's consumer stops and resumes from its last id. */
  events: { queues: string[]; restartAfter: number };
}

/** The `every` schedule the run makes with upsertSchedule once every process runs (run-sim.ts); its invariants: invariants-recurring.ts. */
export interface EveryPlan {
  everyMs: number;
  limit: number;
  /** startDate and endDate, ms after the schedule is made (database clock). */
  startMs: number;
  endMs: number;
}

const BEHAVIOURS: Record<Behaviour, number> = { ok: 62, throw: 7, junk: 3, timeout: 3, hang: 1, snooze: 4, block: 3, write: 8, step: 5, spawn: 0, ratelimited: 0 };

function handlerOptions(r: Prng, leaseMs: number): JobHandlerOptions {
  const prefetch = r.weighted({ none: 2, fixed: 3, auto: 3 });
  return {
    concurrency: r.pick([1, 2, 4, 8]),
    ...(prefetch === 'none' ? { prefetch: 0 } : prefetch === 'fixed' ? { prefetch: r.pick([5, 20, 50]) } : { prefetch: 'auto' as const }),
    eagerStart: r.chance(0.5),
    maxAttempts: r.int(1, 4),
    backoff: { baseMs: r.pick([20, 100, 300]), maxMs: 1_000 },
    timeoutMs: r.pick([1_500, 3_000, 6_000, leaseMs * 4]),
  };
}

export function processPlan(r: Prng, slot: string): ProcessPlan {
  const leaseMs = r.pick([1_000, 2_000, 3_000]);
  const queues = Object.fromEntries(SIM_QUEUES.map((q) => [q, handlerOptions(r, leaseMs)])) as Record<SimQueue, JobHandlerOptions>;
  queues.prio = { ...queues.prio, concurrency: 1, prefetch: r.pick([10, 'auto' as const]) };
  return { slot, leaseMs, poolSize: r.int(3, 6), shutdownGraceMs: r.pick([1_000, 3_000]), sweepIntervalMs: r.pick([500, 1_000, 2_000]), queues: queues as ProcessPlan['queues'] };
}

function payload(r: Prng, nonce: () => number, weights = BEHAVIOURS): SimPayload {
  const b = r.weighted(weights);
  const ms = b === 'hang' ? r.int(5_000, 15_000) : b === 'block' ? r.int(50, 400) : b === 'timeout' ? 0 : r.chance(0.7) ? r.int(1, 10) : r.chance(0.8) ? r.int(20, 300) : r.int(2_000, 9_000);
  return { b, ms, n: nonce() };
}

function flowPlan(r: Prng, nonce: () => number, keys: number): FlowPlan {
  const shape = r.weighted({ chain: 3, fan: 3, diamond: 2, saga: 3 });
  const policy = r.weighted({ fail: 3, cancel: 1, continue: 1 });
  // Steps mostly succeed; one in a few fails, which is what compensation and the policies are about.
  const stepWeights: Record<Behaviour, number> = { ...BEHAVIOURS, ok: 70, throw: 6, junk: 1, hang: 0, timeout: 1, block: 1, spawn: 4 };
  const step = (ref: string, dependsOn: string[], compensate: boolean) => {
    const p = payload(r, nonce, stepWeights);
    if (p.b === 'spawn') p.key = `k${r.int(1, keys)}`;
    if (p.ms > 1_000) p.ms = r.int(1, 50);
    return { ref, payload: p, dependsOn, compensate };
  };
  const jobs: FlowPlan['jobs'] = [];
  if (shape === 'chain' || shape === 'saga') {
    const n = r.int(2, shape === 'saga' ? 5 : 8);
    for (let i = 0; i < n; i++) jobs.push(step(`s${i}`, i === 0 ? [] : [`s${i - 1}`], shape === 'saga' || r.chance(0.3)));
  } else if (shape === 'fan') {
    const n = r.int(3, 40);
    jobs.push(step('root', [], r.chance(0.5)));
    for (let i = 0; i < n; i++) jobs.push(step(`p${i}`, ['root'], r.chance(0.6)));
    jobs.push(step('join', jobs.slice(1).map((j) => j.ref), false));
  } else {
    jobs.push(step('a', [], true), step('b', ['a'], true), step('c', ['a'], true), step('d', ['b', 'c'], false));
  }
  return { shape, policy, jobs };
}

/** The plan of a seed: `minutes` of steps, about 4 a second, then the drain (not planned: run-sim waits). */
export function generatePlan(seed: number, minutes: number): SimPlan {
  const r = new Prng(seed);
  let n = 0;
  const nonce = () => ++n;
  const workerCount = r.int(2, 3);
  const processes = [processPlan(r, 'e'), ...Array.from({ length: workerCount }, (_, i) => processPlan(r, `w${i + 1}`))];
  const keys = r.int(3, 12);
  const steps: Step[] = [];
  const end = minutes * 60_000;
  for (let at = 1_000; at < end; at += r.int(50, 450)) {
    const type = r.weighted({ enqueue: 80, operator: 15, fault: 5 });
    if (type === 'enqueue') {
      const kind = r.weighted<Exclude<EnqueueKind, 'sql' | 'limited' | 'batch' | 'tx-handler' | 'rated' | 'wait' | 'fair' | 'thread'>>({ single: 20, bulk: 12, 'tx-commit': 6, 'tx-rollback': 3, unique: 16, delayed: 6, priority: 5, flow: 12 });
      if (kind === 'flow') {
        steps.push({ at, type, kind, jobs: [], flow: flowPlan(r, nonce, keys) });
        continue;
      }
      const count = kind === 'bulk' || kind === 'tx-commit' || kind === 'tx-rollback' ? r.int(2, 60) : kind === 'priority' ? r.int(10, 40) : 1;
      const jobs = Array.from({ length: count }, () => {
        const job: PlannedJob = {
          payload: payload(r, nonce),
          priority: kind === 'priority' ? r.int(0, 9) : r.chance(0.1) ? r.int(-5, 5) : 0,
          delayMs: kind === 'delayed' ? r.int(200, 20_000) : 0,
        };
        if (kind === 'unique') {
          job.key = `k${r.int(1, keys)}`;
          job.onConflict = r.weighted({ keep: 1, replace: 2, 'keep-run-at': 1 });
          job.delayMs = r.chance(0.5) ? r.int(100, 3_000) : 0;
        }
        return job;
      });
      steps.push({ at, type, kind, jobs });
    } else if (type === 'operator') {
      const kind = r.weighted<OperatorKind>({ 'bulk-cancel': 8, cancel: 10, retry: 12, 'bulk-retry': 4, replace: 14, 'pause-resume': 6, prune: 2, close: 2, 'priority-probe': 3, 'lock-wait': 3, change: 0, weights: 0, limits: 0, 'add-job': 3, 'schedule-edit': 0, 'history-move': 0 });
      steps.push({ at, type, kind, pick: r.next(), holdMs: r.int(200, 2_000) });
    } else {
      const kind = r.weighted<'kill' | 'stop'>({ kill: 1, stop: 1 });
      steps.push({ at, type, kind, target: r.int(1, workerCount), holdMs: r.int(1_500, 7_000) });
    }
  }
  // Features added after the first seeds were run draw from a second stream, so that a seed's main plan (above)
  // stays the same: SQL enqueues (pg_queue_enqueue, pg_queue_enqueue_unique) and the limited queues.
  const x = new Prng((seed ^ 0x5bd1e995) >>> 0);
  const globalConcurrency = x.int(1, 3);
  for (const p of processes) {
    // A limited queue takes no prefetch and no eager start (either would bypass the claim that enforces the limit): the module refuses both.
    p.queues.lim = { concurrency: x.pick([1, 2, 4]), prefetch: 0, eagerStart: false, globalConcurrency, maxAttempts: 3, timeoutMs: 3_000 };
    p.queues.keyed = { concurrency: x.pick([2, 4]), prefetch: 0, eagerStart: false, concurrencyPerKey: 1, maxAttempts: 3, timeoutMs: 3_000 };
  }
  for (let at = 1_500; at < end; at += x.int(800, 3_000)) {
    if (x.chance(0.5)) {
      const job: PlannedJob = { payload: payload(x, nonce), priority: 0, delayMs: x.chance(0.2) ? x.int(100, 2_000) : 0 };
      if (x.chance(0.5)) {
        job.key = `k${x.int(1, keys)}`;
        job.onConflict = x.weighted({ keep: 1, replace: 2, 'keep-run-at': 1 });
      }
      steps.push({ at, type: 'enqueue', kind: 'sql', jobs: [job] });
    } else {
      const queue = x.pick(LIMITED_QUEUES);
      const jobs = Array.from({ length: x.int(3, 25) }, (): PlannedJob => ({
        payload: { b: 'ok', ms: x.int(20, 300), n: nonce() },
        priority: 0,
        delayMs: 0,
        queue,
        ...(queue === 'keyed' ? { concurrencyKey: `c${x.int(1, 3)}` } : x.chance(0.5) ? { concurrencyKey: `c${x.int(1, 3)}` } : {}),
      }));
      steps.push({ at, type: 'enqueue', kind: 'limited', jobs });
    }
  }
  addNetFaults(seed, end, workerCount, steps);
  addRestarts(seed, end, steps);
  addStalls(seed, end, steps);
  addHandlerKinds(seed, end, processes, nonce, steps);
  const rateLimit = addRated(seed, end, processes, nonce, steps);
  addWaits(seed, end, nonce, steps);
  addChanges(seed, end, steps);
  addRuntimeLimits(seed, end, nonce, steps);
  const fair = addFair(seed, end, processes, nonce, steps);
  addLifoAndQueueAfter(seed, end, nonce, steps);
  // The schedule `tick` (sim-worker.ts) fires every second in every process; each scans at least this often.
  const sched = featureStream(seed, 0xc2b2ae35);
  for (const p of processes) p.recurringPollMs = sched.pick([200, 1_000, 5_000]);
  // Some runs put PgBouncer in transaction mode between every process and PostgreSQL (behind the workers' proxies).
  const pgbouncer = featureStream(seed, 0x68e31da4).chance(0.4);
  const logs = addLogs(seed, processes);
  addRetention(seed, processes);
  const every = planEvery(seed, end);
  addScheduleEdits(seed, end, steps);
  const events = planEvents(seed, processes);
  const history = addHistory(seed, end, processes, steps);
  addKeyPriorities(seed, steps);
  steps.sort((a, b) => a.at - b.at);
  return { seed, minutes, processes, steps, keys, globalConcurrency, rateLimit, fair, pgbouncer, logs, every, events, ...(history ? { history } : {}) };
}

/**
 * Priority within a key (issue 42; migration KeyPriorities1764780000000): in half the seeds, about a third of the jobs
 * with a key of queues `keyed` and `fair` get a priority other than 0 (-2 to 3), drawn from a stream of their own
 * after the plan is made, so that every other draw of a seed stays as it was. The keyed and fair claims take each key's
 * highest priority first: `order.priority-within-a-claim` checks it per key, and `fair.overtaken` leaves out a job
 * a higher one of its key went ahead of.
 */
function addKeyPriorities(seed: number, steps: Step[]): void {
  const kp = featureStream(seed, 0xa54ff53a);
  if (!kp.chance(0.5)) return;
  for (const step of steps) {
    if (step.type !== 'enqueue' || (step.kind !== 'fair' && step.kind !== 'limited')) continue;
    for (const job of step.jobs) {
      if (job.concurrencyKey !== undefined && (job.queue === 'keyed' || job.queue === FAIR_QUEUE) && kp.chance(0.35)) job.priority = kp.pick([-2, -1, 1, 2, 3]);
    }
  }
}

/**
 * The event stream (issue 43): two to four of the queues record events (always `sim` and `flow`, so that retries,
 * sweeps, cancels and flow ends are among them; a queue that does not record stays in every run); the run's consumer
 * (run-sim.ts, SimEventConsumer) stops after 50 to 400 events and resumes from its last id. Recording is turned on
 * by recordEvents() before the processes start; each process also declares it (`recordEvents: true` on the handler,
 * turned on again at its boot, a restart's included) for each recording queue it serves, by a coin. Invariants:
 * invariants-events.ts.
 */
function planEvents(seed: number, processes: ProcessPlan[]): SimPlan['events'] {
  const g = featureStream(seed, 0x5be0cd19);
  const more = (['undo', 'prio', 'lim', 'batch'] as const).filter(() => g.chance(0.4)).slice(0, 2);
  const queues: SimQueue[] = ['sim', 'flow', ...more];
  const d = featureStream(seed, 0x1f83d9ab);
  for (const p of processes) for (const q of queues) if (p.queues[q] && d.chance(0.5)) p.queues[q] = { ...p.queues[q], recordEvents: true };
  return { queues, restartAfter: g.int(50, 400) };
}

/**
 * Job logs (issue 43): the handlers of a third of the jobs log 1 to 7 lines each run, half before their work and the
 * rest after it (or after it threw), some of them longer than the lines kept and some of two lines (sim-worker.ts,
 * logLines); every process keeps 3, 5 or 20 lines per job, of 40 or 2,000 characters. Invariants: invariants-logs.ts.
 */
function addLogs(seed: number, processes: ProcessPlan[]): SimPlan['logs'] {
  const g = featureStream(seed, 0x3c6ef372);
  const logs = { maxLines: g.pick([3, 5, 20]), maxLineLength: g.pick([40, 2_000]) };
  for (const p of processes) p.jobLogs = logs;
  return logs;
}

/**
 * completedRetentionMs 0 (README, "Retention"): in half the runs, each worker process deletes the plain jobs it
 * completes at their completion (a flow's job is kept with its result, for its dependents), and its pruner deletes
 * every completed job it finds; the other processes keep them. The run log reads such a deletion as the completion it
 * is (tables.ts, sim_track), so every invariant judges those jobs as completed, then pruned.
 */
function addRetention(seed: number, processes: ProcessPlan[]): void {
  const g = featureStream(seed, 0x7f4a7c15);
  if (!g.chance(0.5)) return;
  for (const p of processes) if (p.slot !== 'e' && g.chance(0.5)) p.completedRetentionMs = 0;
}

/**
 * Partitioned history (README, "Long retention: partitioned history"): in 40 % of the runs every process moves the
 * finished jobs out of background_jobs into background_jobs_history (hourly partitions) once they are `moveAfterMs`
 * old (0, 2 or 10 s), every 1 to 5 s on its maintenance pass; and every 4 to 12 s the operator runs a pass of the mover
 * at once (the run's host, `history-move`). The run log's trigger records a move as a delete from background_jobs, as
 * it records a prune: a moved job is judged as pruned by the invariants that read background_jobs, and as it is by
 * those that read background_jobs_all (results, logs, the events' last status); flow.pruned-while-live holds the mover
 * to a flow's jobs going together too.
 */
function addHistory(seed: number, end: number, processes: ProcessPlan[], steps: Step[]): SimPlan['history'] {
  const h = featureStream(seed, 0x94d049bb);
  if (!h.chance(0.4)) return undefined;
  const history = { moveAfterMs: h.pick([0, 2_000, 10_000]), moveIntervalMs: h.int(1_000, 5_000) };
  for (const p of processes) p.history = history;
  for (let at = 3_000; at < end; at += h.int(4_000, 12_000)) steps.push({ at, type: 'operator', kind: 'history-move', pick: h.next(), holdMs: 0 });
  return history;
}

/**
 * A stream of its own for each feature added after the second, so that adding one leaves every other part of a
 * seed's plan as it was (a seed that found something still names the same plan).
 */
export const featureStream = (seed: number, salt: number) => new Prng((seed ^ salt) >>> 0);

/**
 * Network faults through each worker's proxy (faults.ts): a connection cut, or a black hole of 1.5 to 7 s (past the
 * lease in most) ended by a cut; one every 4 to 15 s.
 */
function addNetFaults(seed: number, end: number, workerCount: number, steps: Step[]): void {
  const y = featureStream(seed, 0x27d4eb2f);
  for (let at = 2_000 + y.int(0, 3_000); at < end; at += y.int(4_000, 15_000)) {
    const kind = y.weighted<'cut' | 'blackhole'>({ cut: 1, blackhole: 1 });
    steps.push({ at, type: 'fault', kind, target: y.int(1, workerCount), holdMs: y.int(1_500, 7_000) });
  }
}

/**
 * A stall of every worker process at once (half the seeds, once or twice, 1.5 to 6 s, between 15 % and 85 % of the
 * plan): SIGSTOP to all of them together, then SIGCONT, as a stalled machine looks from the rows (every holder stops
 * renewing at the same moment while PostgreSQL's clock moves on, and when they wake each one's sweeper meets every
 * other's lapsed leases while their handlers go on). The enqueuing process is left running (its waits are judged by
 * their own clock). Each process's stop is a fault of its own (`SIGSTOP`, its held jobs in fault_held).
 */
function addStalls(seed: number, end: number, steps: Step[]): void {
  const s = featureStream(seed, 0xd6e8feb8);
  if (!s.chance(0.5)) return;
  for (let i = s.int(1, 2); i > 0; i--) steps.push({ at: Math.round(end * (0.15 + 0.7 * s.next())), type: 'fault', kind: 'stall', target: 0, holdMs: s.int(1_500, 6_000) });
}

/**
 * PostgreSQL restarted (a fast shutdown, down 1.5 to 4 s, then up on the same port and data): in half the seeds,
 * once, between a fifth and three quarters of the plan. Every process's connections break at once, LISTEN too;
 * the plan's other steps wait until the server is back (faults.ts, restartPostgres). Only where the simulation
 * runs its own server (sim.spec.ts); against a server given by URL the step is skipped, and says so.
 */
function addRestarts(seed: number, end: number, steps: Step[]): void {
  const y = featureStream(seed, 0x1b873593);
  if (!y.chance(0.5)) return;
  steps.push({ at: Math.round(end * (0.2 + 0.55 * y.next())), type: 'fault', kind: 'restart', target: 0, holdMs: y.int(1_500, 4_000) });
}

/**
 * A batch handler (queue `batch`: calls of 2 to 20 jobs, gathered up to 0-200 ms) and a transactional one (queue
 * `txq`: its app row written through job.manager commits with the completion), each process with its own options;
 * enqueues of 2 to 30 batch jobs or 1 to 8 transactional ones every 1 to 4 s.
 */
function addHandlerKinds(seed: number, end: number, processes: ProcessPlan[], nonce: () => number, steps: Step[]): void {
  const z = featureStream(seed, 0x165667b1);
  for (const p of processes) {
    // prefetch and transactional are refused beside batch; eager start does not apply (a batch is gathered by its claim).
    p.queues.batch = { batch: { size: z.int(2, 20), waitMs: z.pick([0, 50, 200]) }, concurrency: z.pick([1, 2]), maxAttempts: z.int(1, 3), backoff: { baseMs: 50, maxMs: 500 }, timeoutMs: z.pick([3_000, 6_000]) };
    p.queues.txq = { transactional: true, concurrency: z.pick([1, 2, 4]), prefetch: z.pick([0, 'auto' as const]), eagerStart: z.chance(0.5), maxAttempts: z.int(1, 3), backoff: { baseMs: 50, maxMs: 500 }, timeoutMs: z.pick([1_500, 3_000]) };
  }
  const txWeights: Record<Behaviour, number> = { ok: 80, throw: 8, junk: 0, timeout: 4, hang: 0, snooze: 0, block: 4, write: 0, step: 0, spawn: 0, ratelimited: 0 };
  for (let at = 1_200; at < end; at += z.int(1_000, 4_000)) {
    if (z.chance(0.5)) {
      const jobs = Array.from({ length: z.int(2, 30) }, (): PlannedJob => ({
        payload: { b: 'ok', ms: z.chance(0.9) ? z.int(1, 50) : z.int(500, 2_000), n: nonce(), how: z.weighted<BatchHow>({ complete: 5, none: 8, fail: 2, snooze: 1, 'throw-call': 1 }) },
        priority: 0,
        delayMs: 0,
      }));
      steps.push({ at, type: 'enqueue', kind: 'batch', jobs });
    } else {
      const jobs = Array.from({ length: z.int(1, 8) }, (): PlannedJob => {
        const b = z.weighted(txWeights);
        return { payload: { b, ms: b === 'block' ? z.int(50, 300) : z.int(1, 100), n: nonce() }, priority: 0, delayMs: 0 };
      });
      steps.push({ at, type: 'enqueue', kind: 'tx-handler', jobs });
    }
  }
  addThreadJobs(seed, end, processes, nonce, steps);
}

/**
 * Queue `cpu`, a thread handler (sim-cpu.thread.ts, one thread per process): 1 to 6 jobs every 1.5 to 5 s that burn
 * the CPU in a thread for 5 to 60 ms (a few longer), throw, throw a non-Error, or run past the queue's timeout. The burns
 * are short: on the 2-core machine the simulation shares with its 4 processes, 400 ms burns took the CPU their event
 * loops needed, and leases of every queue lapsed (seed 43); so did two threads per process, less often. Its own stream, so
 * that the plans of the other features stay as they were for a seed.
 */
function addThreadJobs(seed: number, end: number, processes: ProcessPlan[], nonce: () => number, steps: Step[]): void {
  const c = featureStream(seed, 0x2f6b1c3d);
  for (const p of processes) {
    // The thread file and poolSize are the decorator's (a `thread` here would replace them whole).
    p.queues.cpu = { concurrency: 1, maxAttempts: c.int(1, 3), backoff: { baseMs: 50, maxMs: 500 }, timeoutMs: c.pick([1_500, 3_000]), eagerStart: c.chance(0.5) };
  }
  const weights: Record<Behaviour, number> = { ok: 80, throw: 8, junk: 4, timeout: 3, hang: 0, snooze: 0, block: 0, write: 0, step: 0, spawn: 0, ratelimited: 0 };
  for (let at = 1_500; at < end; at += c.int(1_500, 5_000)) {
    const jobs = Array.from({ length: c.int(1, 6) }, (): PlannedJob => ({ payload: { b: c.weighted(weights), ms: c.chance(0.9) ? c.int(5, 60) : c.int(100, 300), n: nonce() }, priority: 0, delayMs: 0 }));
    steps.push({ at, type: 'enqueue', kind: 'thread', jobs });
  }
}

/**
 * Queue `rated`: a rate limit of 2 to 10 starts per 0.5 to 2 s in all processes together, fed by bursts of 5 to 30
 * short jobs every 2 to 6 s, more than the window lets start, so that the limit is what paces them.
 */
function addRated(seed: number, end: number, processes: ProcessPlan[], nonce: () => number, steps: Step[]): SimPlan['rateLimit'] {
  const q = featureStream(seed, 0x85ebca6b);
  const rateLimit = { max: q.int(2, 10), intervalMs: q.pick([500, 1_000, 2_000]) };
  // A limited queue takes no prefetch and no eager start: the module refuses both.
  for (const p of processes) p.queues.rated = { concurrency: q.pick([1, 2, 4]), prefetch: 0, eagerStart: false, rateLimit, maxAttempts: 2, timeoutMs: 3_000 };
  for (let at = 2_500; at < end; at += q.int(2_000, 6_000)) {
    const jobs = Array.from({ length: q.int(5, 30) }, (): PlannedJob => ({ payload: { b: q.chance(0.9) ? 'ok' : 'throw', ms: q.int(1, 200), n: nonce() }, priority: 0, delayMs: 0, queue: RATED_QUEUE }));
    steps.push({ at, type: 'enqueue', kind: 'rated', jobs });
  }
  return rateLimit;
}

/**
 * Jobs the enqueuing process waits for (QueueService.waitFor, answered in sim_waits): 1 to 5 plain jobs of queue
 * `sim` every 1 to 3 s, most succeeding, some failing once or for good, timing out or sleeping.
 */
function addWaits(seed: number, end: number, nonce: () => number, steps: Step[]): void {
  const w = featureStream(seed, 0x9e3779b9);
  const weights: Record<Behaviour, number> = { ok: 70, throw: 10, junk: 3, timeout: 3, hang: 0, snooze: 5, block: 2, write: 4, step: 3, spawn: 0, ratelimited: 0 };
  for (let at = 1_800; at < end; at += w.int(1_000, 3_000)) {
    const jobs = Array.from({ length: w.int(1, 5) }, (): PlannedJob => ({ payload: payload(w, nonce, weights), priority: 0, delayMs: w.chance(0.2) ? w.int(100, 2_000) : 0 }));
    steps.push({ at, type: 'enqueue', kind: 'wait', jobs });
  }
}

/**
 * LIFO and onConflict 'queue-after' (issue 43), from their own stream: every 0.5 to 2.5 s either a few LIFO jobs of
 * queue `sim` (some with a priority), or a burst of 'queue-after' duplicates of one key (q1..q3, apart from the 'unique'
 * keys: a key's duplicates meet its running holder, a successor waits and takes the later payloads). Invariants:
 * invariants-lifo.ts (one successor per key at most, none left waiting without a holder, each run with the payload its
 * row had, and a successor never running beside the holder it waited for).
 */
function addLifoAndQueueAfter(seed: number, end: number, nonce: () => number, steps: Step[]): void {
  const l = featureStream(seed, 0x85ebca6b);
  const weights: Record<Behaviour, number> = { ok: 80, throw: 8, junk: 0, timeout: 2, hang: 0, snooze: 4, block: 0, write: 3, step: 3, spawn: 0, ratelimited: 0 };
  for (let at = 1_300; at < end; at += l.int(500, 2_500)) {
    if (l.chance(0.5)) {
      const jobs = Array.from({ length: l.int(1, 6) }, (): PlannedJob => ({ payload: payload(l, nonce, weights), priority: l.chance(0.3) ? l.int(1, 3) : 0, delayMs: 0, lifo: true }));
      steps.push({ at, type: 'enqueue', kind: 'single', jobs: [jobs[0]] });
      if (jobs.length > 1) steps.push({ at: at + 1, type: 'enqueue', kind: 'bulk', jobs });
    } else {
      const key = `q${l.int(1, 3)}`;
      for (let i = 0, t = at; i < l.int(2, 6); i++, t += l.int(10, 400)) {
        steps.push({ at: t, type: 'enqueue', kind: 'unique', jobs: [{ payload: { b: 'ok', ms: l.int(50, 600), n: nonce() }, priority: 0, delayMs: 0, key, onConflict: 'queue-after' }] });
      }
    }
  }
}

/**
 * Changes after enqueue (issue 43: promote, changePriority, changeDelay, updatePayload) of jobs at the workers' front,
 * where some are queued, some read ahead, some running: every 1 to 5 s. The operator (operator.ts) picks the change
 * from `pick`; the runs' payload invariant (a handler never runs with a payload its row no longer had when it started)
 * and the answers recorded in sim_ops are what it checks.
 */
function addChanges(seed: number, end: number, steps: Step[]): void {
  const c = featureStream(seed, 0x7feb352d);
  for (let at = 2_200; at < end; at += c.int(1_000, 5_000)) steps.push({ at, type: 'operator', kind: 'change', pick: c.next(), holdMs: c.int(0, 30_000) });
}

/**
 * Queue `fair` (fair share across keys, issue 42): bursts of 4 to 30 jobs every 1.5 to 5 s over keys f1..f4 (f1, of
 * option weight 3, gets the most) and a few without a key (found by a claim's look for them: on every claim while the
 * last look found some, else once per KEYLESS_LOOK_MS, so the quiet between bursts turns the look off and a burst's
 * keyless jobs must be found again); a per-key cap of 2 in half the seeds, read-ahead (0, 3 or 'auto') in the others;
 * and an operator that
 * stores runtime weights (or removes them) every 3 to 10 s. Invariants: invariants-fair.ts.
 */
function addFair(seed: number, end: number, processes: ProcessPlan[], nonce: () => number, steps: Step[]): SimPlan['fair'] {
  const f = featureStream(seed, 0x27d4eb2f);
  const perKey = f.chance(0.5) ? 2 : undefined;
  // Without a per-key cap, fair share reads ahead (its claim holds the jobs past the free slots): none, a few, or 'auto'.
  const prefetch = perKey ? 0 : f.pick([0, 3, 'auto' as const]);
  let slots = 0;
  for (const p of processes) {
    const concurrency = f.pick([1, 2, 4]);
    slots += concurrency;
    p.queues.fair = { concurrency, prefetch, eagerStart: false, fairness: { weights: { f1: 3 } }, ...(perKey && { concurrencyPerKey: perKey }), maxAttempts: 3, timeoutMs: 3_000 };
  }
  for (let at = 2_000; at < end; at += f.int(1_500, 5_000)) {
    const jobs = Array.from({ length: f.int(4, 30) }, (): PlannedJob => {
      const key = f.weighted({ f1: 4, f2: 2, f3: 1, f4: 1, none: 1 });
      return { payload: { b: f.chance(0.92) ? 'ok' : 'throw', ms: f.int(5, 250), n: nonce() }, priority: 0, delayMs: 0, queue: FAIR_QUEUE, ...(key !== 'none' && { concurrencyKey: key }) };
    });
    steps.push({ at, type: 'enqueue', kind: 'fair', jobs });
    // Now and then a backlog of key f1 (100 to 250 short jobs): the other keys' next jobs must not wait behind it.
    if (f.chance(0.2)) {
      const backlog = Array.from({ length: f.int(100, 250) }, (): PlannedJob => ({ payload: { b: 'ok', ms: f.int(5, 60), n: nonce() }, priority: 0, delayMs: 0, queue: FAIR_QUEUE, concurrencyKey: 'f1' }));
      steps.push({ at: at + 1, type: 'enqueue', kind: 'fair', jobs: backlog });
    }
  }
  for (let at = 3_000; at < end; at += f.int(3_000, 10_000)) steps.push({ at, type: 'operator', kind: 'weights', pick: f.next(), holdMs: 0 });
  return { perKey, slots };
}

/**
 * Limits changed at runtime and by a handler (issue 42, part 2), on queue `lim`: every 2 to 6 s either the operator
 * changes its limits (operator.ts, `limits`: globalConcurrency 1 to 4 or back to the decorator's, and sometimes each
 * process's concurrency), or a job of it meets a partner's 429 (`ratelimited`: RateLimitedError of 200 to 1,000 ms on
 * its first run). Checked from the tables: the global limit in force at each start (invariants.ts, limitsHeld, the
 * changes read from sim_queue_changes) and no start inside a block (rateLimitedBlocks).
 */
function addRuntimeLimits(seed: number, end: number, nonce: () => number, steps: Step[]): void {
  const l = featureStream(seed, 0x1b873593);
  for (let at = 3_000; at < end; at += l.int(2_000, 6_000)) {
    if (l.chance(0.5)) steps.push({ at, type: 'operator', kind: 'limits', pick: l.next(), holdMs: 0 });
    else {
      const jobs = Array.from({ length: l.int(3, 12) }, (_, i): PlannedJob => ({
        payload: { b: i === 0 ? 'ratelimited' : 'ok', ms: i === 0 ? l.int(200, 1_000) : l.int(20, 200), n: nonce() },
        priority: 0,
        delayMs: 0,
        queue: 'lim',
      }));
      steps.push({ at, type: 'enqueue', kind: 'limited', jobs });
    }
  }
}

/**
 * Schedule edits (issues 40 and 44: the dashboard's and the CLI's schedule edit is upsertSchedule): every 3 to 8 s
 * the operator acts on the runtime schedule `edited` (run-sim.ts: every 1 s into queue `tick`): half the time it sets
 * a new interval (1, 1.5 or 2.5 s), a quarter it pauses it for 0.5 to 4 s, a quarter it fires it now (operator.ts,
 * `schedule-edit`). Invariants: invariants-schedule-edits.ts.
 */
function addScheduleEdits(seed: number, end: number, steps: Step[]): void {
  const e = featureStream(seed, 0x27d4eb2f);
  for (let at = 2_500; at < end; at += e.int(3_000, 8_000)) steps.push({ at, type: 'operator', kind: 'schedule-edit', pick: e.next(), holdMs: e.int(500, 4_000) });
}

/**
 * The `every` schedule (issue 43): an interval of 1 to 3 s with a limit of 5 to 40 fires, starting 0 to 10 s after it
 * is made and ending 15 s to the whole run later, so that in some seeds the limit ends it and in others the end date
 * (every process fires it, faults and all; invariants-recurring.ts checks the spacing, the limit and the dates).
 */
function planEvery(seed: number, end: number): EveryPlan {
  const e = featureStream(seed, 0x4cf5ad43);
  const startMs = e.int(0, 10_000);
  return { everyMs: e.pick([1_000, 1_500, 2_000, 3_000]), limit: e.int(5, 40), startMs, endMs: startMs + e.int(15_000, Math.max(15_000, end)) };
}

/** Shares of the plan's steps by type and kind, for the report and docs/reliability.md. */
export function planShares(plan: SimPlan): Record<string, string> {
  const counts = new Map<string, number>();
  for (const s of plan.steps) counts.set(`${s.type}:${s.kind}`, (counts.get(`${s.type}:${s.kind}`) ?? 0) + 1);
  const total = plan.steps.length;
  const shares = Object.fromEntries([...counts].sort((a, b) => b[1] - a[1]).map(([k, c]) => [k, `${c} (${((100 * c) / total).toFixed(1)}%)`]));
  // Not a step: a schedule every process declares, firing every second for the whole run.
  const keyed = plan.steps.flatMap((st) => (st.type === 'enqueue' && (st.kind === 'fair' || st.kind === 'limited') ? st.jobs.filter((j) => j.concurrencyKey !== undefined && (j.queue === 'keyed' || j.queue === FAIR_QUEUE)) : []));
  const prioritized = keyed.filter((j) => j.priority !== 0).length;
  return { ...shares, 'setup:key-priorities': prioritized ? `${prioritized} of ${keyed.length} keyed jobs of keyed and fair` : 'none', 'setup:pgbouncer': plan.pgbouncer ? 'every process, transaction mode' : 'no', 'setup:job-logs': `${plan.logs.maxLines} lines of ${plan.logs.maxLineLength} characters per job`, 'setup:events': `recorded for ${plan.events.queues.join(', ')} (declared on the handler in ${plan.processes.filter((p) => Object.values(p.queues).some((o) => o?.recordEvents)).map((p) => p.slot).join(', ') || 'no process'}); the consumer restarts after ${plan.events.restartAfter} events`, 'setup:retention-0': plan.processes.filter((p) => p.completedRetentionMs === 0).map((p) => p.slot).join(', ') || 'none', 'setup:history': plan.history ? `moved after ${plan.history.moveAfterMs} ms, a pass every ${plan.history.moveIntervalMs} ms in every process` : 'off', 'recurring:tick': `every 1 s in ${plan.processes.length} processes (scans every ${plan.processes.map((p) => p.recurringPollMs).join('/')} ms)`, 'recurring:every': `every ${plan.every.everyMs} ms, limit ${plan.every.limit}, from +${plan.every.startMs} ms until +${plan.every.endMs} ms` };
}
