// The thread file of the simulation's queue `cpu` (a thread handler: sim-worker.ts declares it, generator.ts plans
// its jobs). It runs inside a worker thread, which cannot use the process's pools: it writes its run to the run log
// (sim_runs) on a connection of its own, so the run log holds what the thread itself did (a record written by the main
// thread before the hand-over would say the job started even when the thread never ran it). It appends each start to
// the fleet's starts file too, as the other handlers do. Its payload says what it does: `ok` burns the CPU for `ms`,
// checking job.signal between slices; `timeout` burns past the queue's timeout the same way; `throw` and `junk` throw.
// A third of its jobs log lines with job.log() as the other handlers do (logLines), from the thread.
import { openSync, writeSync } from 'node:fs';
import { threadId } from 'node:worker_threads';
import pg from 'pg';
import type { ThreadJob } from '../../src/index.js';
import type { SimPayload } from './generator.js';

const env = process.env;
let records: pg.Pool | undefined;
let starts: number | undefined;
/** Runs of this thread: the run log's seq, apart from the process's own (its main thread counts from 1). */
let local = 0;

function db(): pg.Pool {
  if (!records) {
    records = new pg.Pool({ connectionString: env.SIM_THREAD_RECORDS_URL, max: 1 });
    records.on('error', () => undefined);
  }
  return records;
}

function burn(ms: number, signal: AbortSignal): void {
  const until = Date.now() + ms;
  let x = 0;
  while (Date.now() < until) {
    for (let i = 0; i < 20_000; i++) x += Math.sqrt(i);
    if (signal.aborted) throw signal.reason;
  }
  if (x < 0) throw new Error('unreachable');
}

function outcomeOf(error: unknown): string {
  if (error instanceof Error) return error.name === 'Error' ? `threw:${error.message.slice(0, 60)}` : `abort:${error.name}`;
  return 'threw:junk';
}

/**
 * Job logs from a thread (job.log() crosses to the main thread): the lines sim-worker.ts's logLines writes, for the same
 * jobs (a third, by nonce), `r<run> a<attempt> <i>`, half before the work and half after it (or after it threw), so
 * that invariants-logs.ts ties each line the row holds to this run. Returns the call that logs one half.
 */
function logLines(job: ThreadJob<SimPayload>, runId: string): (first: boolean) => void {
  const n = Math.abs(job.payload.n ?? 0);
  if (!Number.isInteger(n) || n % 3 !== 0) return () => undefined;
  const count = 1 + (n % 7);
  const half = Math.ceil(count / 2);
  const long = n % 5 === 0 ? ` ${'x'.repeat(60)}` : '';
  const second = n % 4 === 0 ? '\nand a second line' : '';
  let i = 0;
  return (first) => {
    for (let k = 0; k < (first ? half : count - half); k++) job.log(`r${runId} a${job.attempt} ${++i}${long}${second}`);
  };
}

export default async function simCpu(job: ThreadJob<SimPayload>): Promise<unknown> {
  const seq = threadId * 1_000_000 + ++local;
  if (env.SIM_THREAD_STARTS_FILE) writeSync((starts ??= openSync(env.SIM_THREAD_STARTS_FILE, 'a')), `${job.id}/${job.attempt}\n`);
  const { rows } = await db().query<{ id: string }>(
    `INSERT INTO sim_runs (job_id, attempt, worker, pid, seq, queue, payload_hash, behaviour, flow_id, flow_ref, compensates, row_status, row_buffered, row_locked_by, concurrency_key)
     SELECT $1, $2, $3, $4, $5, $6, md5($7::jsonb::text), $8, j.flow_id, j.flow_ref, j.compensates, j.status::text, j.buffered, j.locked_by, j.concurrency_key
     FROM (SELECT 1) AS one LEFT JOIN background_jobs AS j ON j.id = $1 RETURNING id`,
    [job.id, job.attempt, env.SIM_THREAD_WORKER_ID, process.pid, seq, job.queue, JSON.stringify(job.payload), job.payload.b],
  );
  const end = (outcome: string) => db().query('UPDATE sim_runs SET ended_at = clock_timestamp(), outcome = $2 WHERE id = $1', [rows[0].id, outcome]);
  const p = job.payload;
  const log = logLines(job, rows[0].id);
  log(true);
  try {
    if (p.b === 'throw') throw new Error('planned failure');
    if (p.b === 'junk') throw p.n % 2 === 0 ? 'a string' : { junk: p.n };
    burn(p.b === 'timeout' ? 3_600_000 : p.ms, job.signal);
  } catch (error) {
    log(false);
    await end(outcomeOf(error)).catch(() => undefined);
    throw error;
  }
  log(false);
  await end('ok');
  return { n: p.n, thread: threadId };
}
