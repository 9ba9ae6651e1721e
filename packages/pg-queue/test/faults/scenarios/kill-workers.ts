import { auditRuns, countWhere, statusCounts, type RunAudit } from '../support/fault-db.js';
import type { Stall } from '../support/stall-watch.js';
import { FAULT_TIMINGS, sleep, type Scenario } from '../support/scenario.js';
import { auditFlows, enqueueFlowsMix, flowsEnded, type FlowsAudit } from './flows-mix.js';

export interface KillWorkersSize {
  workers: number;
  jobs: number;
  killEveryMs: number;
  /** Stop killing after this many (the short version); the full one kills until every job is done. */
  maxKills: number;
  /** Handler run time, uniformly in [min, max] ms: long enough that a kill always finds jobs in flight. */
  jobMs: [number, number];
  timeoutMs: number;
  /** The work queue's read-ahead (default: the handler's, 'auto'). */
  prefetch?: number | 'auto';
  /**
   * 'kill' (default): SIGKILL and replace the victim. 'freeze': SIGSTOP the victim for freezeMs (past the lease,
   * and past a read-ahead buffer's short lease), then SIGCONT; one frozen worker at a time, none replaced.
   */
  fault?: 'kill' | 'freeze';
  freezeMs?: number;
  /** Flows enqueued with the plain jobs (scenarios/flows-mix.ts), so that the faults hit them mid-flow. */
  flows?: number;
  /**
   * 'suite' (default): the suite enqueues every job up front. 'workers': the worker processes enqueue them
   * themselves, one call at a time, `feedGapMs` apart (in 'feed' jobs of FEED_SIZE each), so that jobs start eagerly in the
   * process that enqueued them, and the faults hit eager starts, enqueues and handlers together. A feed cut
   * by a fault runs again from the start: the jobs then number more than `jobs`, and all must complete.
   */
  producer?: 'suite' | 'workers';
  feedGapMs?: number;
}

export interface KillWorkersResult {
  audit: RunAudit;
  kills: number;
  states: Record<string, number>;
  /** Jobs in flight (started, outcome not written) on the workers when they were killed (or frozen). */
  inFlightAtKills: number;
  seconds: number;
  /** With `flows`: how they ended, read back from the tables. */
  flows?: FlowsAudit;
  /** Work jobs inserted already claimed (eager starts). */
  eager: number;
  /** Stalls of the whole machine past half the lease, each recorded as a fault (support/stall-watch.ts). */
  stalls: readonly Stall[];
}

/** Jobs per feed job (producer: 'workers'). */
const FEED_SIZE = 25;

/**
 * The 'feed' jobs that have the worker processes enqueue `jobs` work jobs themselves (producer: 'workers'), in feeds
 * of FEED_SIZE (a fraction of a second each): a feed cut by a fault is redone whole, so feeds as long as a worker's
 * share would be cut again and again by kills a second apart, and never end.
 */
export async function enqueueFeeds(s: Scenario, jobs: number, jobMs: [number, number], gapMs = 10): Promise<void> {
  const payload = { n: FEED_SIZE, ms: jobMs, gapMs };
  await s.queue.enqueueMany(Array.from({ length: Math.ceil(jobs / FEED_SIZE) }, () => ({ queue: 'feed', payload, maxAttempts: 25 })));
}

/**
 * Scenario 1: N worker processes drain a queue while one of them, picked at random, is SIGKILLed every
 * second and replaced by a fresh process. Killed workers write nothing more: their jobs come back through
 * the sweeper once their lease expires.
 */
export async function killWorkers(s: Scenario, size: KillWorkersSize): Promise<KillWorkersResult> {
  const t0 = performance.now();
  const fleet = s.fleet(size.prefetch === undefined ? FAULT_TIMINGS : { ...FAULT_TIMINGS, queues: { work: { prefetch: size.prefetch } } });
  const freeze = size.fault === 'freeze';
  const slots = Array.from({ length: size.workers }, (_, i) => `kill-w${i + 1}`);
  await Promise.all(slots.map((slot) => fleet.start(slot)));

  const [lo, hi] = size.jobMs;
  const fed = size.producer === 'workers';
  if (fed) await enqueueFeeds(s, size.jobs, size.jobMs, size.feedGapMs);
  // maxAttempts 25, set at enqueue (this instance has no @JobHandler to take it from): a job caught in five
  // kills would otherwise be dead-lettered, right by the rules but not what this scenario counts.
  for (let i = 0; i < (fed ? 0 : size.jobs); i += 5_000) {
    const n = Math.min(5_000, size.jobs - i);
    await s.queue.enqueueMany(Array.from({ length: n }, () => ({ queue: 'work', payload: { ms: lo + Math.floor(Math.random() * (hi - lo + 1)) }, maxAttempts: 25 })));
  }

  const mix = size.flows ? await enqueueFlowsMix(s.queue, size.flows, size.jobMs) : undefined;

  const deadline = Date.now() + size.timeoutMs;
  const completed = () => countWhere(s.db, `SELECT 1 FROM background_jobs WHERE queue_name = 'work' AND status = 'completed'`);
  // Fed by the workers: done when every feed has run to its end and every job it enqueued completed.
  const outstanding = fed
    ? () => countWhere(s.db, `SELECT 1 FROM background_jobs WHERE queue_name IN ('feed', 'work') AND status <> 'completed'`)
    : async () => size.jobs - (await completed());
  let kills = 0;
  let inFlightAtKills = 0;
  const restarts: Promise<unknown>[] = [];
  // A feed frozen past its lease and resumed runs on until its next heartbeat aborts its signal, enqueueing as it
  // goes: fed, the scenario ends only when nothing is outstanding twice, a heartbeat and more apart.
  const finished = async () => {
    if ((await outstanding()) > 0) return false;
    if (!fed) return true;
    await sleep(1_500);
    return (await outstanding()) === 0;
  };
  while (!(await finished())) {
    if (Date.now() > deadline) throw new Error(`scenario 1: jobs still not completed after ${size.timeoutMs} ms: ${JSON.stringify(await statusCounts(s.db, 'work'))}`);
    await sleep(size.killEveryMs);
    const candidates = fleet.ready();
    if (kills >= size.maxKills || candidates.length === 0 || (await outstanding()) === 0) continue;
    let victim = candidates[Math.floor(Math.random() * candidates.length)];
    if (freeze) {
      // The worker holding the most jobs: a random one may have run out of work already (the other read it all ahead).
      const { rows } = await s.db.query<{ w: string }>(
        `SELECT locked_by AS w FROM background_jobs WHERE queue_name = 'work' AND status = 'processing' GROUP BY 1 ORDER BY count(*) DESC`,
      );
      victim = candidates.find((c) => c.workerId === rows[0]?.w) ?? victim;
      inFlightAtKills += await fleet.freeze(victim);
      kills += 1;
      await sleep(size.freezeMs ?? 6_000);
      await fleet.resume(victim);
      continue;
    }
    inFlightAtKills += await fleet.kill(victim);
    kills += 1;
    // Replaced at once, in the background, so the kills keep their one-per-second pace while it boots.
    const slot = victim.workerId.split('.')[0];
    const restart = fleet.start(slot);
    restart.catch(() => undefined); // reported by the Promise.all below, not as an unhandled rejection
    restarts.push(restart);
  }
  await Promise.all(restarts);
  if (mix) await flowsEnded(s.db, mix.ids, deadline);
  const seconds = (performance.now() - t0) / 1_000;
  const flows = mix ? await auditFlows(s.db, mix.ids, mix.failing) : undefined;
  const eager = await countWhere(s.db, `SELECT 1 FROM fault_eager e JOIN background_jobs j ON j.id = e.job_id WHERE j.queue_name = 'work'`);
  return { audit: await auditRuns(s.db, 'work'), kills, states: await statusCounts(s.db, 'work'), inFlightAtKills, seconds, flows, eager, stalls: fleet.stalls };
}
