import type { PostgresServer } from '@internal/pg-harness';
import { waitFor } from '../../support/test-app.js';
import { auditRuns, countWhere, statusCounts, type RunAudit } from '../support/fault-db.js';
import { FAULT_TIMINGS, sleep, type Scenario } from '../support/scenario.js';
import { enqueueFeeds } from './kill-workers.js';

export interface RestartPostgresSize {
  workers: number;
  jobs: number;
  /** How long the server stays down between stop and start. */
  downMs: number;
  jobMs: [number, number];
  /** Jobs enqueued one by one after recovery, to time the NOTIFY wake-up. */
  probes: number;
  timeoutMs: number;
  /** The work queue's read-ahead (default: the handler's, 'auto'). */
  prefetch?: number | 'auto';
  /** 'workers': the worker processes enqueue the jobs themselves, one call at a time (see KillWorkersSize.producer). */
  producer?: 'suite' | 'workers';
}

export interface RestartPostgresResult {
  audit: RunAudit;
  states: Record<string, number>;
  completedBeforeRestart: number;
  /** From the stop to the server accepting connections again. */
  outageMs: number;
  /** From the server being back to every worker LISTENing again. */
  listenersBackMs: number;
  /** From the server being back to the first handler run on the backlog (database clock). */
  workResumedMs: number;
  /** Enqueue (commit) to handler start, database clock, one job at a time, after recovery. */
  probeMs: number[];
  seconds: number;
  /** Work jobs inserted already claimed (eager starts). */
  eager: number;
}

/**
 * Scenario 2: PostgreSQL stops mid-run (a fast shutdown: every session is terminated) and starts again on
 * the same data directory. Polling is set to a minute, both with LISTEN up and down, so that whatever
 * runs after the restart was woken by the reconnected listener, not by a timer.
 */
export async function restartPostgres(s: Scenario, server: PostgresServer, size: RestartPostgresSize): Promise<RestartPostgresResult> {
  if (!server.restart) throw new Error(`a ${server.source} server cannot be restarted by the suite; scenario 2 needs an embedded one`);
  const t0 = performance.now();
  const fleet = s.fleet({
    ...FAULT_TIMINGS,
    pollIntervalMs: 60_000,
    fallbackPollIntervalMs: 60_000,
    ...(size.prefetch === undefined ? {} : { queues: { work: { prefetch: size.prefetch } } }),
  });
  await Promise.all(Array.from({ length: size.workers }, (_, i) => fleet.start(`restart-w${i + 1}`)));
  const [lo, hi] = size.jobMs;
  const fed = size.producer === 'workers';
  if (fed) await enqueueFeeds(s, size.jobs, size.jobMs);
  else await s.queue.enqueueMany(Array.from({ length: size.jobs }, () => ({ queue: 'work', payload: { ms: lo + Math.floor(Math.random() * (hi - lo + 1)) }, maxAttempts: 25 })));
  const completed = () => countWhere(s.db, `SELECT 1 FROM background_jobs WHERE queue_name = 'work' AND status = 'completed'`);
  const completedBeforeRestart = await waitFor('a third of the jobs done', async () => {
    const n = await completed();
    return n >= size.jobs / 3 && n;
  }, size.timeoutMs);

  const stopAt = performance.now();
  await server.restart(size.downMs);
  const backAt = performance.now();
  const backAtDb = await waitFor('the server', async () => (await s.db.query<{ now: Date }>('SELECT clock_timestamp() AS now').catch(() => undefined))?.rows[0].now);
  // Whatever any worker started until now was in flight at the outage; a job run twice must have been one of them.
  await fleet.recordOutage();

  // Every worker's listener session is back and has run its LISTEN (read from the server itself).
  await waitFor('listeners back', async () => {
    const n = await countWhere(
      s.db,
      `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'nestjs-pg-queue listener' AND query LIKE 'LISTEN%'`,
    ).catch(() => 0);
    return n === size.workers;
  }, 30_000, 10);
  const listenersBackMs = performance.now() - backAt;

  // At once, while the backlog still drains: probes go to an idle queue of their own.
  const probeMs: number[] = [];
  for (let i = 0; i < size.probes; i++) {
    await sleep(100);
    const id = await s.queue.enqueue('probe', { i });
    const ms = await waitFor('probe started', async () => {
      const { rows } = await s.db.query<{ ms: number }>(
        `SELECT (extract(epoch FROM r.started_at - j.created_at) * 1000)::float8 AS ms
         FROM fault_runs r JOIN background_jobs j ON j.id = r.job_id WHERE r.job_id = $1`,
        [id],
      );
      return rows[0]?.ms;
    }, 10_000, 5);
    probeMs.push(ms);
  }

  const { rows: [resumed] } = await s.db.query<{ ms: number }>(
    `SELECT (extract(epoch FROM min(started_at) - $1) * 1000)::float8 AS ms FROM fault_runs WHERE queue = 'work' AND started_at > $1`,
    [backAtDb],
  );
  // Fed by the workers, a feed that failed in the outage is redone (its jobs enqueued again): every job the table holds.
  const done = fed
    ? async () => (await countWhere(s.db, `SELECT 1 FROM background_jobs WHERE queue_name IN ('feed', 'work') AND status <> 'completed'`)) === 0
    : async () => (await completed()) === size.jobs;
  await waitFor('all jobs completed', done, size.timeoutMs, 100).catch(async (error: Error) => {
    throw new Error(`${error.message}: ${JSON.stringify(await statusCounts(s.db, 'work'))}`);
  });
  return {
    audit: await auditRuns(s.db, 'work'),
    states: await statusCounts(s.db, 'work'),
    completedBeforeRestart,
    outageMs: backAt - stopAt,
    listenersBackMs,
    workResumedMs: resumed.ms,
    probeMs,
    seconds: (performance.now() - t0) / 1_000,
    eager: await countWhere(s.db, `SELECT 1 FROM fault_eager e JOIN background_jobs j ON j.id = e.job_id WHERE j.queue_name = 'work'`),
  };
}
