import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { FlowModel } from './adapters/flow-shapes.js';
import type { SystemId } from './adapters/types.js';

/**
 * What the orchestrator knows about each system's tables, without loading the library: how to tell that
 * every job is done, how to seed a large backlog in one statement, which relations to measure.
 */
export interface SystemInfo {
  id: SystemId;
  label: string;
  /** npm package whose version the report shows (plain-sql has none). */
  packageName?: string;
  /** How it was configured, for the report. */
  settings: string;
  /**
   * One row, column busy: is any job not yet finished (queued, claimed or running)? EXISTS probes that the
   * job table's own partial indexes answer where it has them, so that polling it during the tail of a run
   * costs the system under test next to nothing.
   */
  busySql: string;
  /**
   * Inserts $1 jobs in one statement (so one transaction): with $2 = false they share one now() as their
   * run_at, as jobs enqueued in one transaction do; with $2 = true their run_at values are spread 1 ms
   * apart in the past, as jobs enqueued over time are. Used only for backlogs too large to enqueue
   * through a library's API in reasonable time; the rows match what the library's own insert writes.
   */
  seedSql: string;
  /** Inserts $1 jobs of the benchmark's queue scheduled for tomorrow (spread over $1 ms), as the library would store them. */
  seedFutureSql: string;
  /** The job table(s) whose size the steady-state scenario reports. */
  relations: string[];
  /**
   * The limits across instances the limits scenario can ask of it: 'global' caps the queue's running jobs over
   * every process, 'perKey' caps them per concurrency key. Absent: none, and the limits scenario skips it. 'fairness':
   * weighted fair share of the slots across keys (the fairness scenario runs only the systems that have it).
   */
  limits?: readonly LimitKind[];
  /**
   * The table whose AFTER INSERT trigger sends the NOTIFY that wakes workers, if the system wakes them that
   * way (pg-boss, graphile-worker and BullMQ call pg_notify in their own insert statements: nothing to switch off).
   */
  notifyTriggerTable?: string;
  /** Jobs that depend on jobs (the flows scenario); absent: the system has none and the scenario skips it. */
  flows?: SystemFlows;
}

export interface SystemFlows {
  /** 'dag': any number of parents per job; 'tree': at most one dependent per job (flow-shapes.ts). */
  model: FlowModel;
  /** One row, column busy: is any flow job not finished yet (blocked or waiting on its parents included)? */
  busySql: string;
  /**
   * One row read after the run, from the system's own tables: jobs (rows of the benchmark's queue), completed,
   * once (completed after exactly one attempt: never retried, never started twice), flows (flows whose last job
   * completed: a flow row's own status where the system keeps one, else its terminal jobs).
   */
  checkSql: string;
  /** How the scenario configures its flows, for the report. */
  settings: string;
}

export type LimitKind = 'global' | 'perKey' | 'fairness';

const FUTURE_TS = `now() + interval '1 day' + g * interval '1 millisecond'`;

const SPREAD_TS = `CASE WHEN $2::boolean THEN now() - ($1::int - g) * interval '1 millisecond' ELSE now() END`;

/** nestjs-pg-queue and the plain SQL loop share the seed's background_jobs table. */
const BACKGROUND_JOBS_TABLE = {
  busySql: `SELECT EXISTS (SELECT 1 FROM background_jobs WHERE status = 'queued')
                OR EXISTS (SELECT 1 FROM background_jobs WHERE status = 'processing') AS busy`,
  seedSql: `
      INSERT INTO background_jobs (queue_name, payload, run_at, created_at, updated_at)
      SELECT 'bench', jsonb_build_object('i', g), t.ts, t.ts, t.ts
      FROM generate_series(1, $1::int) AS g, LATERAL (SELECT ${SPREAD_TS} AS ts) AS t`,
  seedFutureSql: `
      INSERT INTO background_jobs (queue_name, payload, run_at)
      SELECT 'bench', jsonb_build_object('f', g), ${FUTURE_TS} FROM generate_series(1, $1::int) AS g`,
  relations: ['background_jobs'],
  notifyTriggerTable: 'background_jobs',
};

export const SYSTEMS: Record<SystemId, SystemInfo> = {
  'pg-queue': {
    id: 'pg-queue',
    label: 'nestjs-pg-queue',
    packageName: 'nestjs-pg-queue',
    limits: ['global', 'perKey', 'fairness'],
    settings:
      'Nest application context, PgQueueModule.forRoot({ connection: { url, poolSize }, queues: { bench: { concurrency, prefetch: 500 - concurrency, batchSize: 500 } } }): claims of up to 500 ahead of free slots (its option for many short jobs, the size of graphile-worker\'s localQueue here); every other option at its default (lease 30 s, heartbeat 10 s, fenced completion, poll 30 s behind LISTEN, sweeper 5 s, pruner 60 s)',
    ...BACKGROUND_JOBS_TABLE,
    flows: {
      model: 'dag',
      // Every flow job waits in 'blocked' (not queued, not processing) until its parents completed; a flow row is open until its last job settles.
      busySql: `SELECT EXISTS (SELECT 1 FROM background_flows WHERE finished_at IS NULL)
                    OR EXISTS (SELECT 1 FROM background_jobs WHERE status IN ('queued', 'processing')) AS busy`,
      // attempts counts the claims that started the handler (a read-ahead claim is charged when it starts).
      checkSql: `SELECT count(*)::int AS jobs, count(*) FILTER (WHERE status = 'completed')::int AS completed,
                        count(*) FILTER (WHERE status = 'completed' AND attempts = 1)::int AS once,
                        (SELECT count(*)::int FROM background_flows WHERE status = 'completed') AS flows
                 FROM background_jobs WHERE queue_name = 'bench'`,
      settings: 'QueueService.enqueueFlow (one statement per flow); the same tuned queue (prefetch, batchSize 500); a dependent is unblocked in its last parent\'s settle transaction (the flow trigger); handlers read parents with job.parents()',
    },
  },
  'pg-boss': {
    id: 'pg-boss',
    label: 'pg-boss',
    packageName: 'pg-boss',
    settings:
      'useListenNotify + queue notify: true, work({ localConcurrency, batchSize, burstWhenBatchFull: true }), one loop per 25 jobs of concurrency (c10: 1x10, c50: 2x25), schedule: false (no cron), supervise on (default), pool max = poolSize',
    busySql: `SELECT EXISTS (SELECT 1 FROM pgboss.job WHERE name = 'bench' AND state IN ('created', 'retry', 'active')) AS busy`,
    seedSql: `
      INSERT INTO pgboss.job (name, data, start_after, created_on, keep_until)
      SELECT 'bench', jsonb_build_object('i', g), t.ts, t.ts, t.ts + interval '14 days'
      FROM generate_series(1, $1::int) AS g, LATERAL (SELECT ${SPREAD_TS} AS ts) AS t`,
    seedFutureSql: `
      INSERT INTO pgboss.job (name, data, start_after, keep_until)
      SELECT 'bench', jsonb_build_object('f', g), ${FUTURE_TS}, ${FUTURE_TS} + interval '14 days' FROM generate_series(1, $1::int) AS g`,
    relations: ['pgboss.job_common'],
    flows: {
      model: 'dag',
      // A job waiting on its parents is 'created' with blocked = true: the busy probe above covers it.
      busySql: `SELECT EXISTS (SELECT 1 FROM pgboss.job WHERE name = 'bench' AND state IN ('created', 'retry', 'active')) AS busy`,
      // retry_count counts the retries; a completed job with 0 ran one attempt. pg-boss has no flow row: a flow is
      // completed when its terminal jobs (those no job depends on) are.
      checkSql: `SELECT count(*)::int AS jobs, count(*) FILTER (WHERE j.state = 'completed')::int AS completed,
                        count(*) FILTER (WHERE j.state = 'completed' AND j.retry_count = 0)::int AS once,
                        count(*) FILTER (WHERE j.state = 'completed' AND NOT EXISTS (
                          SELECT 1 FROM pgboss.job_dependency AS d WHERE d.parent_name = j.name AND d.parent_id = j.id))::int AS flows
                 FROM pgboss.job AS j WHERE j.name = 'bench'`,
      settings: 'boss.flow() (one transaction per flow); flowIntervalSeconds: 1 (its minimum; default 5: dependents are unblocked by a background resolver, not by the completion), work({ ...the same loops x batch, perJobResults: true, pollingIntervalSeconds: 0.5, notifyPollingIntervalSeconds: 0.5 }) (minimums: the resolver sends no NOTIFY); handlers read parents with getDependencies + findJobs per parent',
    },
  },
  'graphile-worker': {
    id: 'graphile-worker',
    label: 'graphile-worker',
    packageName: 'graphile-worker',
    settings:
      'run({ pgPool, concurrency, preset: { worker: { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0, preparedStatements: true } } }) as on its performance page; pollInterval default (2 s) behind LISTEN',
    // Finished jobs are deleted, so any row left is unfinished.
    busySql: `SELECT EXISTS (SELECT 1 FROM graphile_worker._private_jobs) AS busy`,
    // Through its own SQL API (add_jobs), which is what WorkerUtils.addJobs calls.
    seedSql: `
      SELECT count(*)::int AS n FROM graphile_worker.add_jobs(ARRAY(
        SELECT ROW('bench', json_build_object('i', g), NULL,
                   CASE WHEN $2::boolean THEN now() - ($1::int - g) * interval '1 millisecond' END,
                   NULL, NULL, NULL, NULL)::graphile_worker.job_spec
        FROM generate_series(1, $1::int) AS g))`,
    seedFutureSql: `
      SELECT count(*)::int AS n FROM graphile_worker.add_jobs(ARRAY(
        SELECT ROW('bench', json_build_object('f', g), NULL, ${FUTURE_TS}, NULL, NULL, NULL, NULL)::graphile_worker.job_spec
        FROM generate_series(1, $1::int) AS g))`,
    relations: ['graphile_worker._private_jobs'],
  },
  bullmq: {
    id: 'bullmq',
    label: 'BullMQ (pg)',
    packageName: 'bullmq',
    // Queue.setGlobalConcurrency; limits per group are BullMQ Pro's, not in the open-source package.
    limits: ['global'],
    settings:
      "PostgreSQL backend (withBackend(createPostgresBackend)), connection { connectionString, max = poolSize, migrate: true } for its Queue and for its Worker (a pool each, as it builds them); one Worker per process with concurrency = the scenario's (c10: 10, c50: 50), as its PostgreSQL guide advises (open-source BullMQ has no batch fetch: each slot claims one job, its completion claims the next in the same statement); LISTEN wake-ups built in; every other option at its default (lock 30 s renewed every 15 s, stalled check 30 s, finished jobs kept, event stream on: 4 rows in bullmq.event per job, counted with the job table)",
    // Finished jobs stay as 'completed'; the claim index (state = 'waiting') and the active index answer these probes.
    busySql: `SELECT EXISTS (SELECT 1 FROM bullmq.job WHERE queue = 'bench' AND state = 'waiting')
                OR EXISTS (SELECT 1 FROM bullmq.job WHERE queue = 'bench' AND state = 'active') AS busy`,
    // Through its own SQL function (add_jobs_bulk), which is what Queue.addBulk calls, with the entries addBulk
    // builds ({ attempts: 0 } is what it stores when no option is given); timestamp is its epoch-ms added time.
    seedSql: `
      SELECT count(*)::int AS n FROM bullmq.add_jobs_bulk('bench', (
        SELECT jsonb_agg(jsonb_build_object(
                 'name', 'bench', 'data', jsonb_build_object('i', g)::text, 'opts', '{"attempts":0}'::jsonb, 'attempts', 0,
                 'timestamp', (extract(epoch FROM ${SPREAD_TS}) * 1000)::bigint) ORDER BY g)
        FROM generate_series(1, $1::int) AS g))`,
    // A delay makes add_jobs_bulk store them as 'delayed', due at timestamp + delay.
    seedFutureSql: `
      SELECT count(*)::int AS n FROM bullmq.add_jobs_bulk('bench', (
        SELECT jsonb_agg(jsonb_build_object(
                 'name', 'bench', 'data', jsonb_build_object('f', g)::text, 'opts', jsonb_build_object('attempts', 0, 'delay', 86400000 + g), 'attempts', 0,
                 'delay', 86400000 + g, 'timestamp', (extract(epoch FROM now()) * 1000)::bigint) ORDER BY g)
        FROM generate_series(1, $1::int) AS g))`,
    // Its event stream is written for every job (and read by QueueEvents): part of what a job costs it.
    relations: ['bullmq.job', 'bullmq.event'],
    flows: {
      model: 'tree',
      // A parent waits in 'waiting-children' until its children completed.
      busySql: `SELECT EXISTS (SELECT 1 FROM bullmq.job WHERE queue = 'bench' AND state IN ('waiting', 'active', 'waiting-children', 'delayed')) AS busy`,
      // attempts_started counts the starts; a flow is completed when its root (the job with no parent) is.
      checkSql: `SELECT count(*)::int AS jobs, count(*) FILTER (WHERE state = 'completed')::int AS completed,
                        count(*) FILTER (WHERE state = 'completed' AND attempts_started = 1)::int AS once,
                        count(*) FILTER (WHERE state = 'completed' AND parent_id IS NULL)::int AS flows
                 FROM bullmq.job WHERE queue = 'bench'`,
      settings: 'FlowProducer.add (one tree per call) from the same PostgreSQL backend; trees only: a chain and a fan-in (the fan without its root), no diamond; handlers read children\'s results with job.getChildrenValues()',
    },
  },
  'pg-queue-defaults': {
    id: 'pg-queue-defaults',
    label: 'nestjs-pg-queue, defaults',
    packageName: 'nestjs-pg-queue',
    settings:
      'the same Nest application context with queues: { bench: { concurrency } } only, what a bare @JobHandler(\'bench\') runs with: prefetch, batchSize and every other option at the library\'s defaults; only in the defaults and spread scenarios',
    ...BACKGROUND_JOBS_TABLE,
  },
  'pg-queue-base': {
    id: 'pg-queue-base',
    label: 'nestjs-pg-queue before',
    settings: 'the same adapter and settings as nestjs-pg-queue, run from the --baseline checkout (the code before the change)',
    // The same adapter: the same limits (the limits and fairness scenarios run before and after).
    limits: ['global', 'perKey', 'fairness'],
    ...BACKGROUND_JOBS_TABLE,
  },
  'plain-sql': {
    id: 'plain-sql',
    label: 'plain SQL loop',
    settings:
      "nestjs-pg-queue's own table, indexes and NOTIFY trigger (its migrations run first); as many loops as the concurrency (c10: 10, c50: 50), each claiming up to 100 due jobs with UPDATE ... WHERE id IN (SELECT ... ORDER BY priority DESC, run_at, id LIMIT 100 FOR UPDATE SKIP LOCKED) RETURNING, running them one after another and completing the batch with one UPDATE ... WHERE id = ANY($1); LISTEN (one loop woken per NOTIFY, all once a claim comes back full) + a 1 s poll; no leases, heartbeats, fencing, retries, timeouts, drain or pruning",
    ...BACKGROUND_JOBS_TABLE,
  },
};

const require = createRequire(import.meta.url);

/** Installed version of a package, read from its package.json (found by walking up from its entry point). */
export function installedVersion(packageName: string): string {
  let dir = dirname(require.resolve(packageName));
  for (let i = 0; i < 6; i++) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === packageName && pkg.version) return pkg.version;
    } catch {
      // not here; go up
    }
    dir = dirname(dir);
  }
  return 'unknown';
}
