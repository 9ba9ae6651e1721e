// One process of the simulation (issue 40): a Nest application context serving the queues sim, flow, undo and prio
// with handlers whose behaviour comes from the payload (generator.ts, Behaviour), and, on request, enqueuing the
// plan's jobs (so that eager start happens here, in a process that has handlers) or acting as the app does (a
// pool of waiting unique inserts). Jest does not run this file: build-worker.ts compiles it next to the library's
// source, and the simulation's WorkerFleet (test/faults/support/fleet.ts) forks and starts it with a
// WorkerProcessConfig. Every handler start is appended to the fleet's starts file synchronously (what the fleet
// records as held at a fault) and to sim_runs (the run log), with the payload's hash as the handler saw it.
//
// IPC besides the start protocol: { type: 'op', seq, op } -> { type: 'op-result', seq, ok, result | error }.
import 'reflect-metadata';
import { Injectable, Module, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { openSync, writeSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { JobHandler, JobSnoozedError, PgQueueModule, RateLimitedError, QueueService, RecurringJob, type BatchJob, type EnqueueResult, type Job, type TransactionalJob } from '../../src/index.js';
import { PgQueueMetrics, PgQueueMetricsModule } from '../../src/metrics/index.js';
import { Registry } from 'prom-client';
import { serveStart } from '../support/serve-start.js';
import type { WorkerProcessConfig } from '../faults/support/worker-process.js';
import type { EnqueueKind, FlowPlan, PlannedJob, SimPayload } from './generator.js';
import { waitAndRecord, waitOutRestarts, watchOwnStalls } from './sim-worker-records.js';

export type WorkerOp =
  | { op: 'enqueue'; kind: EnqueueKind; jobs: PlannedJob[]; flow?: FlowPlan }
  | { op: 'lock-wait'; key: string; calls: number }
  | { op: 'close' }
  | { op: 'metrics' };

/** What `metrics` answers: this process's job counters by queue (its Prometheus registry), and its worker id. */
export interface SimMetrics {
  worker: string;
  counters: Record<string, Record<string, number>>;
}

let config!: WorkerProcessConfig;
let records!: pg.Pool;
let app!: INestApplicationContext;
let starts: number | undefined;
/** Handler calls so far in this process, counted synchronously at each start. */
let seq = 0;

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error);
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(timer);
      reject(signal.reason as Error);
    }, { once: true });
  });

async function recordStart(job: Job<SimPayload>): Promise<string> {
  const mine = ++seq;
  if (starts !== undefined) writeSync(starts, `${job.id}/${job.attempt}\n`);
  const { rows } = await records.query<{ id: string }>(
    `INSERT INTO sim_runs (job_id, attempt, worker, pid, seq, queue, payload_hash, behaviour, flow_id, flow_ref, compensates, row_status, row_buffered, row_locked_by, concurrency_key)
     SELECT $1, $2, $3, $4, $5, $6, md5($7::jsonb::text), $8, j.flow_id, j.flow_ref, j.compensates, j.status::text, j.buffered, j.locked_by, j.concurrency_key
     FROM (SELECT 1) AS one LEFT JOIN background_jobs AS j ON j.id = $1 RETURNING id`,
    [job.id, job.attempt, config.workerId, process.pid, mine, job.queue, JSON.stringify(job.payload), job.payload?.b ?? '?'],
  );
  return rows[0].id;
}

async function recordEnd(runId: string, outcome: string): Promise<void> {
  await records.query('UPDATE sim_runs SET ended_at = clock_timestamp(), outcome = $2 WHERE id = $1', [runId, outcome]);
}

function outcomeOf(error: unknown): string {
  if (error instanceof Error) return error.name === 'Error' ? `threw:${error.message.slice(0, 60)}` : `abort:${error.name}`;
  return 'threw:junk';
}

/**
 * Job logs (issue 43): a third of the jobs (by nonce) log 1 to 7 lines per run, each naming its run (sim_runs' id), the
 * attempt the handler saw and its number in the run (`r<run> a<attempt> <i>`), so that invariants-logs.ts can tie every
 * stored line to a run of its job. Some lines are longer than the shortest bound, some of two lines. Returns the call
 * that logs the next line; none for a job that does not log (it writes nothing more).
 */
function logLines(job: Job<SimPayload>, runId: string): { count: number; log: () => void } | undefined {
  const n = job.payload?.n ?? 0;
  if (!Number.isInteger(n) || Math.abs(n) % 3 !== 0) return undefined;
  let i = 0;
  const count = 1 + (Math.abs(n) % 7);
  const long = Math.abs(n) % 5 === 0 ? ` ${'x'.repeat(60)}` : '';
  const second = Math.abs(n) % 4 === 0 ? '\nand a second line' : '';
  return { count, log: () => job.log(`r${runId} a${job.attempt} ${++i}${long}${second}`) };
}

/** Half the run's lines before its work (`first`), the rest after it, or after it threw. */
function logHalf(lines: ReturnType<typeof logLines>, first: boolean): void {
  if (!lines) return;
  const half = Math.ceil(lines.count / 2);
  for (let i = 0; i < (first ? half : lines.count - half); i++) lines.log();
}

async function run(job: Job<SimPayload>): Promise<unknown> {
  const runId = await recordStart(job);
  const p = job.payload;
  const lines = logLines(job, runId);
  logHalf(lines, true);
  try {
    switch (p.b) {
      case 'ok':
        await sleep(p.ms, job.signal);
        break;
      case 'throw':
        throw new Error('planned failure');
      case 'junk':
        throw p.n % 2 === 0 ? 'a string' : { junk: p.n };
      case 'timeout':
        await sleep(3_600_000, job.signal);
        break;
      case 'hang':
        await sleep(p.ms);
        break;
      case 'snooze':
        await job.sleep('nap', 200);
        await sleep(p.ms, job.signal);
        break;
      case 'block': {
        const until = Date.now() + p.ms;
        while (Date.now() < until) {
          // the event loop is blocked: no heartbeat, no timer
        }
        break;
      }
      case 'write':
        await records.query('INSERT INTO sim_app (job_id, attempt, worker) VALUES ($1, $2, $3)', [job.id, job.attempt, config.workerId]);
        await sleep(p.ms, job.signal);
        break;
      case 'step': {
        const mark = (name: string) => records.query('INSERT INTO sim_steps (job_id, name, attempt, worker) VALUES ($1, $2, $3, $4)', [job.id, name, job.attempt, config.workerId]).then(() => name);
        await job.step('one', () => mark('one'));
        if (job.attempt === 1) throw new Error('planned failure after step one');
        await job.step('two', () => mark('two'));
        break;
      }
      case 'ratelimited': {
        // A partner's 429 on the job's first run (its attempt is not charged, so the count of its runs tells).
        const { rows } = await records.query<{ n: number }>('SELECT count(*)::int AS n FROM sim_runs WHERE job_id = $1', [job.id]);
        if (rows[0].n === 1) throw new RateLimitedError(p.ms);
        await sleep(20, job.signal);
        break;
      }
      case 'spawn':
        await job.spawn([{ ref: 'child', queue: 'sim', payload: { b: 'ok', ms: 1, n: -Number(job.id) } satisfies SimPayload, uniqueKey: p.key }]);
        break;
    }
  } catch (error) {
    logHalf(lines, false);
    await recordEnd(runId, error instanceof JobSnoozedError || error instanceof RateLimitedError ? 'slept' : outcomeOf(error)).catch(() => undefined);
    throw error;
  }
  logHalf(lines, false);
  await recordEnd(runId, 'ok');
  return { n: p.n };
}

/**
 * A batch call: each job's start and end in the run log, as for single jobs; each job settled as its payload says
 * (`none`: by the call, which throws when one of its jobs says `throw-call`). A completed job's result names the
 * run that completed it, so that a stale call's outcome shows in the row.
 */
async function runBatch(jobs: BatchJob<SimPayload>[]): Promise<void> {
  const runIds = await Promise.all(jobs.map((job) => recordStart(job)));
  const lines = jobs.map((job, i) => logLines(job, runIds[i]));
  for (const l of lines) logHalf(l, true);
  await sleep(Math.max(...jobs.map((job) => job.payload.ms)));
  for (const l of lines) logHalf(l, false);
  // Only on a job's first attempt, or one such job would fail its whole call on every attempt.
  const callThrows = jobs.some((job) => job.payload.how === 'throw-call' && job.attempt === 1);
  const outcomes: string[] = [];
  for (const [i, job] of jobs.entries()) {
    const how = job.payload.how ?? 'none';
    if (how === 'complete') job.complete({ n: job.payload.n, run: runIds[i] });
    if (how === 'fail') job.fail(new Error('planned batch failure'));
    // A snooze is uncharged: only the job's first run snoozes, or it would snooze for ever.
    const snoozes = how === 'snooze' && (await records.query<{ n: number }>('SELECT count(*)::int AS n FROM sim_runs WHERE job_id = $1', [job.id])).rows[0].n === 1;
    if (snoozes) job.snooze(200);
    outcomes.push(how === 'complete' ? 'ok' : how === 'fail' ? 'threw:planned batch failure' : snoozes ? 'slept' : callThrows ? 'threw:call' : 'ok');
  }
  await Promise.all(runIds.map((id, i) => recordEnd(id, outcomes[i]).catch(() => undefined)));
  if (callThrows) throw new Error('call');
}

/** A transactional handler: its app row (sim_tx) is written in the job's transaction, then it behaves as planned. */
async function runTransactional(job: TransactionalJob<SimPayload>): Promise<unknown> {
  const runId = await recordStart(job);
  const p = job.payload;
  const lines = logLines(job, runId);
  logHalf(lines, true);
  try {
    await job.manager.query('INSERT INTO sim_tx (job_id, attempt, worker) VALUES ($1, $2, $3)', [job.id, job.attempt, config.workerId]);
    if (p.b === 'throw') throw new Error('planned failure');
    if (p.b === 'block') {
      const until = Date.now() + p.ms;
      while (Date.now() < until) {
        // the event loop is blocked, inside the transaction
      }
    } else {
      await sleep(p.b === 'timeout' ? 3_600_000 : p.ms, job.signal);
    }
  } catch (error) {
    logHalf(lines, false);
    await recordEnd(runId, outcomeOf(error)).catch(() => undefined);
    throw error;
  }
  logHalf(lines, false);
  await recordEnd(runId, 'ok');
  return { n: p.n };
}

@Injectable()
class SimHandlers {
  @JobHandler('batch')
  batch(jobs: BatchJob<SimPayload>[]) {
    return runBatch(jobs);
  }

  // Every process declares it; each fire time is enqueued by whichever instance wins it (invariants-recurring.ts).
  // A window of 60 s: a fire missed while every scheduler was slow is caught up, so none may be missing.
  @RecurringJob('* * * * * *', { name: 'tick', missedFires: { windowMs: 60_000 }, payload: { b: 'ok', ms: 1, n: 0 } })
  tick(job: Job<SimPayload>) {
    return run(job);
  }

  // A thread handler: the method is not called; the jobs run in sim-cpu.thread.ts, which writes its own runs.
  @JobHandler('cpu', { thread: { file: fileURLToPath(new URL('./sim-cpu.thread.js', import.meta.url)), poolSize: 1 } })
  cpu(): void {}

  @JobHandler('rated')
  rated(job: Job<SimPayload>) {
    return run(job);
  }

  @JobHandler('txq')
  txq(job: TransactionalJob<SimPayload>) {
    return runTransactional(job);
  }

  // Defaults only: each process's options come from the plan through `queues` (generator.ts, processPlan).
  @JobHandler('sim')
  sim(job: Job<SimPayload>) {
    return run(job);
  }

  @JobHandler('flow')
  flow(job: Job<SimPayload>) {
    return run(job);
  }

  @JobHandler('undo')
  undo(job: Job<SimPayload>) {
    return run(job);
  }

  @JobHandler('prio')
  prio(job: Job<SimPayload>) {
    return run(job);
  }

  @JobHandler('lim')
  lim(job: Job<SimPayload>) {
    return run(job);
  }

  @JobHandler('keyed')
  keyed(job: Job<SimPayload>) {
    return run(job);
  }

  @JobHandler('fair')
  fair(job: Job<SimPayload>) {
    return run(job);
  }
}

async function recordEnqueues(ids: string[], kind: string, committed: boolean, jobs: PlannedJob[], answers?: EnqueueResult[]): Promise<void> {
  await records.query(
    `INSERT INTO sim_enqueues (job_id, kind, committed, unique_key, on_conflict, answer, by_worker, concurrency_key)
     SELECT u.a, u.b, u.c, u.d, u.e, u.f, $7, key.k FROM unnest($1::int8[], $2::text[], $3::boolean[], $4::text[], $5::text[], $6::text[]) WITH ORDINALITY AS u (a, b, c, d, e, f, i)
     JOIN unnest($8::text[]) WITH ORDINALITY AS key (k, i) ON key.i = u.i`,
    [
      ids,
      ids.map(() => kind),
      ids.map(() => committed),
      ids.map((_, i) => jobs[i]?.key ?? null),
      ids.map((_, i) => jobs[i]?.onConflict ?? null),
      ids.map((_, i) => (answers?.[i] ? (answers[i].replaced ? 'replaced' : answers[i].duplicate ? 'duplicate' : 'inserted') : 'inserted')),
      config.workerId,
      ids.map((_, i) => jobs[i]?.concurrencyKey ?? null),
    ],
  );
}

const spec = (queue: string, j: PlannedJob) => ({
  queue,
  payload: j.payload,
  priority: j.priority,
  ...(j.delayMs > 0 ? { delayMs: j.delayMs } : {}),
  ...(j.key ? { uniqueKey: j.key, onConflict: j.onConflict } : {}),
  ...(j.lifo ? { lifo: true } : {}),
});

async function enqueue(op: Extract<WorkerOp, { op: 'enqueue' }>): Promise<unknown> {
  const queue = app.get(QueueService);
  const target = op.kind === 'priority' ? 'prio' : 'sim';
  switch (op.kind) {
    case 'single':
    case 'delayed': {
      const id = await queue.enqueue(target, op.jobs[0].payload, spec(target, op.jobs[0]));
      await recordEnqueues([id], op.kind, true, op.jobs);
      return [id];
    }
    case 'unique': {
      const answer = await queue.enqueueUnique(target, op.jobs[0].payload, { ...spec(target, op.jobs[0]), uniqueKey: op.jobs[0].key! });
      await recordEnqueues([answer.id], op.kind, true, op.jobs, [answer]);
      return answer;
    }
    case 'bulk':
    case 'priority': {
      const ids = await queue.enqueueMany(op.jobs.map((j) => spec(target, j)));
      await recordEnqueues(ids, op.kind, true, op.jobs);
      return ids;
    }
    case 'tx-commit':
    case 'tx-rollback': {
      const client = await records.connect();
      // A checked-out client has no listener of the pool's: a connection killed between two of its statements (a
      // restart of PostgreSQL) would emit an unhandled 'error' and crash this app (seed 989321333, process w2.1).
      let lost: Error | undefined;
      const onError = (error: Error) => (lost = error);
      client.on('error', onError);
      let ids: string[] = [];
      try {
        await client.query('BEGIN');
        ids = await queue.enqueueMany(op.jobs.map((j) => spec(target, j)), { manager: client });
        await client.query(op.kind === 'tx-commit' ? 'COMMIT' : 'ROLLBACK');
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw error;
      } finally {
        client.off('error', onError);
        client.release(lost); // a lost connection leaves the pool
      }
      await recordEnqueues(ids, op.kind, op.kind === 'tx-commit', op.jobs);
      return ids;
    }
    case 'sql': {
      // Enqueued from SQL, as a trigger or another language does (docs/guides/sql-enqueue.md).
      const j = op.jobs[0];
      const payload = JSON.stringify(j.payload);
      if (j.key) {
        const { rows } = await records.query<{ id: string; duplicate: boolean; replaced: boolean }>(
          `SELECT id::text, duplicate, replaced FROM pg_queue_enqueue_unique('sim', $1::jsonb, unique_key => $2, on_conflict => $3, delay_ms => $4)`,
          [payload, j.key, j.onConflict ?? 'keep', j.delayMs],
        );
        await recordEnqueues([rows[0].id], 'sql', true, op.jobs, [rows[0]]);
        return rows[0];
      }
      const { rows } = await records.query<{ id: string }>(`SELECT pg_queue_enqueue('sim', $1::jsonb, delay_ms => $2)::text AS id`, [payload, j.delayMs]);
      await recordEnqueues([rows[0].id], 'sql', true, op.jobs);
      return rows[0].id;
    }
    case 'batch':
    case 'tx-handler':
    case 'thread':
    case 'rated': {
      const into = ({ batch: 'batch', rated: 'rated', thread: 'cpu' } as Record<string, string>)[op.kind] ?? 'txq';
      const ids = await queue.enqueueMany(op.jobs.map((j) => spec(into, j)));
      await recordEnqueues(ids, op.kind, true, op.jobs);
      return ids;
    }
    case 'wait': {
      const ids = await queue.enqueueMany(op.jobs.map((j) => spec('sim', j)));
      await recordEnqueues(ids, op.kind, true, op.jobs);
      // Waited for in the background: the step is the enqueue; each answer lands in sim_waits when it comes.
      for (const id of ids) void waitAndRecord(records, queue, id);
      return ids;
    }
    case 'limited':
    case 'fair': {
      const ids = await queue.enqueueMany(op.jobs.map((j) => ({ queue: j.queue!, payload: j.payload, ...(j.priority !== 0 ? { priority: j.priority } : {}), ...(j.concurrencyKey ? { concurrencyKey: j.concurrencyKey } : {}) })));
      await recordEnqueues(ids, op.kind, true, op.jobs);
      return ids;
    }
    case 'flow': {
      const flow = op.flow!;
      const onFailure = flow.policy;
      const made = await queue.enqueueFlow({
        name: `${flow.shape}/${flow.policy}`,
        jobs: flow.jobs.map((j) => ({
          ref: j.ref,
          queue: 'flow',
          payload: j.payload,
          dependsOn: j.dependsOn.map((ref) => ({ ref, onFailure })),
          ...(j.compensate ? { compensate: { queue: 'undo', payload: { b: 'ok', ms: 1, n: -j.payload.n } satisfies SimPayload } } : {}),
        })),
      });
      const ids = flow.jobs.map((j) => made.jobs[j.ref]);
      await recordEnqueues(ids, 'flow', true, []);
      return made;
    }
  }
}

async function dispatch(op: WorkerOp): Promise<unknown> {
  switch (op.op) {
    case 'enqueue':
      return enqueue(op);
    case 'lock-wait': {
      // The app's own enqueues of a key another transaction holds: each waits on that transaction's lock, with a
      // connection of the queue's pool (issue 39, item 5).
      const queue = app.get(QueueService);
      const calls = Array.from({ length: op.calls }, (_, i) => queue.enqueueUnique('sim', { b: 'ok', ms: 1, n: -1_000_000 - i } satisfies SimPayload, { uniqueKey: op.key }));
      const answers = await Promise.allSettled(calls);
      return answers.map((a) => (a.status === 'fulfilled' ? a.value.id : String(a.reason)));
    }
    case 'close': {
      const t = Date.now();
      await app.close();
      return { ms: Date.now() - t };
    }
    case 'metrics':
      return readCounters();
  }
}

/** The counters of PgQueueMetricsModule (jobs started, completed, failed, dead, cancelled, lease losses) by queue. */
async function readCounters(): Promise<SimMetrics> {
  const { body } = await app.get(PgQueueMetrics).scrape();
  const counters: SimMetrics['counters'] = {};
  for (const line of body.split('\n')) {
    const m = /^pg_queue_(jobs_\w+|lease_lost)_total\{queue="([^"]*)"\} (\d+)$/.exec(line);
    if (m) (counters[m[2]] ??= {})[m[1]] = Number(m[3]);
  }
  return { worker: config.workerId, counters };
}

function recordCrashes(): void {
  const crash = (event: string) => (error: unknown) => {
    const text = error instanceof Error ? (error.stack ?? error.message) : String(error);
    process.stderr.write(`${event}: ${text}\n`);
    const recorded = records.query('INSERT INTO fault_crashes (worker, pid, event, error) VALUES ($1, $2, $3, $4)', [config.workerId, process.pid, event, text]);
    void recorded.finally(() => process.exit(70));
  };
  process.on('uncaughtException', crash('uncaughtException'));
  process.on('unhandledRejection', crash('unhandledRejection'));
}

async function boot(): Promise<void> {
  if (config.startsFile) starts = openSync(config.startsFile, 'a');
  // What the thread file (queue cpu) needs to write its runs: its threads read the process's environment.
  process.env.SIM_THREAD_RECORDS_URL = config.recordsUrl ?? config.url;
  process.env.SIM_THREAD_WORKER_ID = config.workerId;
  if (config.startsFile) process.env.SIM_THREAD_STARTS_FILE = config.startsFile;
  // The run log goes straight to the database: only the queue's own connections pass the proxy the faults break.
  records = new pg.Pool({ connectionString: config.recordsUrl ?? config.url, max: 6 });
  records.on('error', () => undefined);
  waitOutRestarts(records);
  recordCrashes();
  watchOwnStalls(records, config.workerId, config.queue.leaseMs ?? 30_000);

  // A DataSource rather than a connection of the queue's own: transactional handlers (queue txq) run in it.
  const dataSource = new DataSource({ type: 'postgres', url: config.url, extra: { max: config.poolSize } });
  @Module({
    imports: [
      PgQueueModule.forRoot({ migrationsRun: false, ...config.queue, dataSource, poolSize: config.poolSize, workerId: config.workerId }),
      // The job counters, read after the drain and compared with what the tables say this process did (metrics.*).
      PgQueueMetricsModule.forRoot({ register: new Registry(), path: false, depth: false }),
    ],
    providers: [SimHandlers],
  })
  class SimWorkerModule {}

  app = await NestFactory.createApplicationContext(SimWorkerModule, { logger: config.logLevels });
  await app.init();
  process.on('message', (message: { type: string; seq: number } & WorkerOp) => {
    if (message.type !== 'op') return;
    dispatch(message).then(
      (result) => process.send?.({ type: 'op-result', seq: message.seq, ok: true, result }),
      (error: unknown) => process.send?.({ type: 'op-result', seq: message.seq, ok: false, error: error instanceof Error ? error.message : String(error) }),
    );
  });
  process.once('SIGTERM', () => {
    void app.close().finally(() => records.end().finally(() => process.exit(0)));
  });
}

serveStart<{ type: string; config: WorkerProcessConfig }>((message) => {
  config = message.config;
  return boot();
});
