// One worker of the fault-injection suite, as its own OS process: a Nest application context with
// PgQueueModule and handlers that write every run to fault_runs, so the suite reads what happened from the
// database. Jest does not run this file: build-worker.ts compiles it, next to a build of the library, and
// fleet.ts forks it. Hence the relative import of the library's source instead of 'nestjs-pg-queue'.
//
// Protocol (IPC): the process loads its code, says { type: 'loaded' }, waits for { type: 'start', config },
// boots, and says { type: 'ready' }. Loading Nest and TypeORM is most of a cold start (1.5 s alone, 5 s with
// four at once on the 2-core CI machine), so the suite forks processes ahead and starts them on demand.
import 'reflect-metadata';
import { Injectable, Module, type LogLevel } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { openSync, writeSync } from 'node:fs';
import pg from 'pg';
import { JobHandler, PgQueueModule, QueueService, type Job, type PgQueueModuleOptions } from '../../../src/index.js';
import { errorText } from '../../../src/utils/error-text.js';
import { FAULTS_MAX_ATTEMPTS, FAULTS_TIMEOUT_MS, type FaultKind } from './fault-kinds.js';
import { serveStart } from '../../support/serve-start.js';

/** What the parent sends with { type: 'start' }. */
export interface WorkerProcessConfig {
  url: string;
  workerId: string;
  /** forRoot options besides connection and workerId (leases, polling, maintenance, per-queue overrides). */
  queue: Omit<PgQueueModuleOptions, 'connection' | 'workerId' | 'dataSource'>;
  poolSize: number;
  /** Where the process writes its records (run log, crashes), when `url` is not the database itself (a proxy the test breaks). */
  recordsUrl?: string;
  logLevels: LogLevel[];
  /**
   * Every handler start is appended here ("<job id>/<attempt>" a line), synchronously, before the handler does
   * anything else. Absent for a process that runs no job (the migrations spec boots this script to migrate).
   */
  startsFile?: string;
}

let config!: WorkerProcessConfig;
let records!: pg.Pool;
/** startsFile, opened once for appending (undefined: none). */
let starts: number | undefined;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const forever = new Promise<never>(() => undefined);
const frozenJobs = new Set<string>();
let allFrozenJobsStarted!: (spinUntil: number) => void;
const frozenJobsStarted = new Promise<number>((resolve) => (allFrozenJobsStarted = resolve));

/**
 * Records a start: first in startsFile, synchronously (so that a SIGKILL or SIGSTOP right after the handler was
 * called still finds it there: the suite reads it at each fault to tell the jobs that had started from the ones
 * only claimed or read ahead), then in fault_runs.
 */
async function recordStart(job: Job): Promise<string> {
  if (starts !== undefined) writeSync(starts, `${job.id}/${job.attempt}\n`);
  const { rows } = await records.query<{ id: string }>(
    'INSERT INTO fault_runs (job_id, queue, attempt, worker, pid) VALUES ($1, $2, $3, $4, $5) RETURNING id',
    [job.id, job.queue, job.attempt, config.workerId, process.pid],
  );
  return rows[0].id;
}

/** Fire and forget: the caller settles right after, so the library sends its outcome before any timer runs. */
function recordFinish(runId: string, result: string): void {
  records.query('UPDATE fault_runs SET finished_at = clock_timestamp(), result = $2 WHERE id = $1', [runId, result]).catch(() => undefined);
}

@Injectable()
class FaultHandlers {
  constructor(private readonly queue: QueueService) {}

  // Scenarios 1 and 2: plain work of a given length.
  @JobHandler('work', { concurrency: 8, maxAttempts: 25, backoff: { baseMs: 50, maxMs: 1_000 } })
  async work(job: Job<{ ms: number }>) {
    await recordStart(job);
    await sleep(job.payload.ms);
  }

  // Scenario 1 with flows in the mix (scenarios/flows-mix.ts): the steps of flows, and a step that always fails.
  /**
   * This process enqueues `n` work jobs, one call at a time, `gapMs` apart (the kill scenario's `producer:
   * 'workers'`): with slots free, each starts eagerly in this process, from its insert. A run cut by a fault
   * is redone from the start (its jobs enqueued again): the scenario counts the jobs the table holds. It stops
   * when its signal aborts (its lease lost while this process was frozen).
   */
  @JobHandler('feed', { concurrency: 1, prefetch: 0, maxAttempts: 25, backoff: { baseMs: 50, maxMs: 1_000 } })
  async feed(job: Job<{ n: number; ms: [number, number]; gapMs: number }>) {
    await recordStart(job);
    const [lo, hi] = job.payload.ms;
    for (let i = 0; i < job.payload.n && !job.signal.aborted; i++) {
      await this.queue.enqueue('work', { ms: lo + Math.floor(Math.random() * (hi - lo + 1)) });
      await sleep(job.payload.gapMs);
    }
  }

  @JobHandler('flow-step', { concurrency: 6, maxAttempts: 25, backoff: { baseMs: 50, maxMs: 1_000 } })
  async flowStep(job: Job<{ ms: number }>) {
    await recordStart(job);
    await sleep(job.payload.ms);
  }

  @JobHandler('flow-fail', { concurrency: 2, maxAttempts: 1 })
  async flowFail(job: Job<{ ms: number }>) {
    await recordStart(job);
    await sleep(job.payload.ms);
    throw new Error('this step always fails');
  }

  // Scenario 2: wake-up latency probes, on a queue of their own so that a backlog elsewhere does not delay them.
  @JobHandler('probe', { concurrency: 2 })
  async probe(job: Job) {
    await recordStart(job);
  }

  // Scenario 3: the first attempts wait until all `together` of them run here, then block this process until
  // one shared deadline (the suite freezes it meanwhile) and settle at once on resume. Synchronous on purpose:
  // on SIGCONT both outcomes go out in the same tick, before the heartbeat timer can notice the lost leases,
  // so the late outcomes reach the database and the fencing there has to reject them.
  @JobHandler('freeze', { concurrency: 2, backoff: { baseMs: 50, maxMs: 1_000 } })
  async freeze(job: Job<{ spinMs: number; fail: boolean; together: number }>) {
    const runId = await recordStart(job);
    if (job.attempt > 1) return recordFinish(runId, 'completed');
    frozenJobs.add(job.id);
    if (frozenJobs.size === job.payload.together) allFrozenJobsStarted(Date.now() + job.payload.spinMs);
    const until = await frozenJobsStarted;
    while (Date.now() < until) {
      // busy: this process does nothing else until the deadline (or until it is resumed past it)
    }
    recordFinish(runId, job.payload.fail ? 'threw late' : 'returned late');
    if (job.payload.fail) throw new Error('late failure from a frozen worker');
  }

  // Scenario 4: good jobs mixed with every way a handler can misbehave. Not async: a thenable kind returns its
  // thenable to the worker as it is (an async handler's promise would adopt it, and the worker would only
  // ever see a promise); its run is recorded meanwhile.
  @JobHandler('faults', { concurrency: 6, maxAttempts: FAULTS_MAX_ATTEMPTS, timeoutMs: FAULTS_TIMEOUT_MS, backoff: { baseMs: 50, maxMs: 200, jitter: false } })
  faults(job: Job<{ kind: FaultKind }>): unknown {
    const thenable = junkThenable(job.payload.kind);
    if (thenable === undefined) return this.faultsAsync(job);
    recordStart(job).catch(() => undefined);
    return thenable;
  }

  private async faultsAsync(job: Job<{ kind: FaultKind }>) {
    const runId = await recordStart(job);
    const circular: Record<string, unknown> = { name: 'loop' };
    circular.self = circular;
    switch (job.payload.kind) {
      case 'ok':
        await sleep(10);
        return recordFinish(runId, 'returned');
      case 'throw-string':
        throw 'a plain string';
      case 'throw-null':
        throw null;
      case 'throw-number':
        throw 42;
      case 'reject-circular':
        return Promise.reject(circular);
      case 'throw-sync':
        return (() => {
          throw new RangeError('thrown synchronously');
        })();
      case 'stack-not-string': {
        const error = new Error('its stack is a number');
        (error as { stack: unknown }).stack = 42;
        throw error;
      }
      case 'name-symbol': {
        const error = new TypeError('its name is a Symbol'); // V8 then throws on reading its stack
        (error as { name: unknown }).name = Symbol('junk');
        throw error;
      }
      case 'throw-revoked':
        throw revokedProxy();
      case 'throw-symbol':
        throw Symbol('thrown');
      case 'result-revoked':
        return {
          toJSON() {
            throw revokedProxy();
          },
        };
      case 'hang':
        return forever;
      case 'abortable':
        await new Promise((_resolve, reject) => job.signal.addEventListener('abort', () => reject(job.signal.reason)));
        return;
      case 'slow-once':
        if (job.attempt === 1) {
          await sleep(FAULTS_TIMEOUT_MS * 2); // well past timeoutMs, signal ignored
          return recordFinish(runId, 'returned late');
        }
        return recordFinish(runId, 'returned');
    }
  }

  // Scenario 4, cancellation: no timeout, never settles; only QueueService.cancel ends these.
  @JobHandler('hangs', { concurrency: 2, maxAttempts: 1 })
  async hangs(job: Job<{ hang: boolean }>) {
    const runId = await recordStart(job);
    if (job.payload.hang) {
      job.signal.addEventListener('abort', () => recordFinish(runId, `signal aborted: ${String(job.signal.reason)}`));
      return forever;
    }
    recordFinish(runId, 'returned');
  }
}

/** A revoked Proxy: every operation on it throws, `instanceof` included. */
function revokedProxy(): object {
  const { proxy, revoke } = Proxy.revocable({}, {});
  revoke();
  return proxy;
}

/** The thenable a thenable kind's handler returns; undefined for the other kinds. */
function junkThenable(kind: FaultKind): unknown {
  type Settle = (value: unknown) => void;
  switch (kind) {
    case 'then-throws':
      return {
        then() {
          throw new Error('then() threw synchronously');
        },
      };
    case 'then-getter-throws':
      return {
        get then(): never {
          throw new Error('the then getter threw');
        },
      };
    case 'then-both': // the first call wins, as with a promise
      return {
        then(resolve: Settle, reject: Settle) {
          reject(new Error('rejected first'));
          resolve('resolved after');
          reject(new Error('rejected again'));
        },
      };
    case 'then-rejects-revoked':
      return {
        then(_resolve: Settle, reject: Settle) {
          reject(revokedProxy());
        },
      };
    default:
      return undefined;
  }
}

/**
 * What reaches the process's uncaughtException / unhandledRejection is written to fault_crashes (nothing a
 * handler does may get there), then the process exits as it would without a listener.
 */
function recordCrashes(): void {
  const crash = (event: string) => (error: unknown) => {
    const text = errorText(error);
    process.stderr.write(`${event}: ${text}\n`);
    const recorded = records.query('INSERT INTO fault_crashes (worker, pid, event, error) VALUES ($1, $2, $3, $4)', [config.workerId, process.pid, event, text]);
    void Promise.race([recorded.catch(() => undefined), sleep(2_000)]).then(() => process.exit(70));
  };
  process.on('uncaughtException', crash('uncaughtException'));
  process.on('unhandledRejection', crash('unhandledRejection'));
}

async function boot(): Promise<void> {
  if (config.startsFile) starts = openSync(config.startsFile, 'a');
  records = new pg.Pool({ connectionString: config.url, max: config.poolSize });
  records.on('error', () => undefined); // idle clients die with a PostgreSQL restart; the next query reconnects
  recordCrashes();

  @Module({
    imports: [
      PgQueueModule.forRoot({
        migrationsRun: false, // the suite's own process ran them
        ...config.queue,
        connection: { url: config.url, poolSize: config.poolSize },
        workerId: config.workerId,
      }),
    ],
    providers: [FaultHandlers],
  })
  class WorkerProcessModule {}

  const app = await NestFactory.createApplicationContext(WorkerProcessModule, { logger: config.logLevels });
  await app.init();
  // The suite ends workers with SIGKILL; SIGTERM (a manual run) still drains gracefully.
  process.once('SIGTERM', () => {
    void app.close().finally(() => records.end().finally(() => process.exit(0)));
  });
}

// Orphaned (the suite's process died): serveStart exits too, rather than work on against a test database.
serveStart<{ type: string; config: WorkerProcessConfig }>((message) => {
  config = message.config;
  return boot();
});
