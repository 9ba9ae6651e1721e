// Partitioned history, measured (docs/performance.md, "Partitioned history (issue 22)"): what retaining millions of
// finished jobs costs the claim with and without history, what pruning a day of them costs, what history costs in
// WAL per job, and how big the hot table stays. One durable server per run (the embedded 18, or --pg-bin for 15):
//
//   npm run history --workspace apps/bench -- [--pg-bin /usr/lib/postgresql/15/bin] [--retained 10000000] [--through 1000000] [--rounds 3]
//
// Each cell is a fresh database, filled with SQL (INSERT ... SELECT, the fastest way to have 10M finished rows), then
// driven through the library as an app drives it: a Nest application context with PgQueueModule.
import 'reflect-metadata';
import { Injectable, Module, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import pg from 'pg';
import { JobHandler, PgQueueModule, QueueService, type PgQueueModuleOptions } from 'nestjs-pg-queue';
import { createDatabase, startPostgres } from '@internal/pg-harness';
import { toolArg } from '../host/tool-args.js';

// The library's maintenance passes, driven by hand: an internal (src/internal.ts), not in the package's exports, so
// loaded by path from its build; typed from its source.
type Internals = typeof import('../../../../packages/pg-queue/src/internal.js');
const { MaintenanceScheduler }: Internals = await import(new URL('../../../../packages/pg-queue/dist/internal.js', import.meta.url).href);

const BIN = toolArg('--pg-bin', '');
const RETAINED = Number(toolArg('--retained', '10000000'));
const THROUGH = Number(toolArg('--through', '1000000'));
const CLAIM_JOBS = 100_000;
const ROUNDS = Number(toolArg('--rounds', '3'));
const SETTLE_JOBS = 200_000;
const DAY = 86_400_000;

let started = 0;
let latencies: number[] = [];
/** When each latency probe was enqueued, by its payload's tag (a job may start before enqueue() has returned its id). */
const enqueuedAt = new Map<number, number>();

@Injectable()
class Handlers {
  @JobHandler('bench', { concurrency: 10 })
  async bench(job: { payload: { n: number; t?: number } }) {
    started++;
    const at = job.payload.t === undefined ? undefined : enqueuedAt.get(job.payload.t);
    if (at !== undefined) latencies.push(performance.now() - at);
  }
}

async function boot(url: string, options: PgQueueModuleOptions): Promise<INestApplicationContext> {
  @Module({ imports: [PgQueueModule.forRoot({ connection: url, ...options })], providers: [Handlers] })
  class BenchModule {}
  const app = await NestFactory.createApplicationContext(BenchModule, { logger: ['error'] });
  await app.init();
  return app;
}

const sql = async <R extends pg.QueryResultRow>(url: string, text: string, values: unknown[] = []) => {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
};
const wal = async (url: string) => BigInt((await sql<{ lsn: string }>(url, `SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::text AS lsn`))[0].lsn);
const waitUntil = async (test: () => boolean | Promise<boolean>, timeoutMs = 600_000) => {
  const deadline = Date.now() + timeoutMs;
  while (!(await test())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
};
const pct = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
};
const f = (n: number, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

/** n finished (completed) jobs over the last `days` days, in background_jobs or straight into history's daily partitions. */
async function retain(url: string, n: number, where: 'hot' | 'history', days = 10): Promise<void> {
  if (n === 0) return;
  if (where === 'history') {
    for (let d = 0; d <= days; d++) {
      await sql(url, `
        DO $$ DECLARE lo timestamptz := date_trunc('day', now() - ${d} * interval '1 day', 'UTC'); BEGIN
          EXECUTE format('CREATE TABLE IF NOT EXISTS background_jobs_history_completed_p%s (LIKE background_jobs_history_completed)', to_char(lo AT TIME ZONE 'UTC', 'YYYYMMDD'));
          EXECUTE format('ALTER TABLE background_jobs_history_completed ATTACH PARTITION background_jobs_history_completed_p%s FOR VALUES FROM (%L) TO (%L)',
                         to_char(lo AT TIME ZONE 'UTC', 'YYYYMMDD'), lo, lo + interval '1 day');
        END $$`);
    }
  }
  const table = where === 'hot' ? 'background_jobs' : 'background_jobs_history';
  const chunk = 1_000_000;
  for (let from = 0; from < n; from += chunk) {
    await sql(url, `
      INSERT INTO ${table} (id, queue_name, payload, status, priority, run_at, attempts, max_attempts, fence_token, created_at, updated_at, finished_at, result, buffered)
      SELECT nextval(pg_get_serial_sequence('background_jobs', 'id')), 'bench', '{"n": 1}', 'completed', 0, t, 1, 3, 1, t, t, t, '{"ok": true}', false
      FROM (SELECT now() - (g::float8 / ${n}) * ${days} * interval '1 day' AS t FROM generate_series(${from + 1}, ${Math.min(n, from + chunk)}) AS g) AS s`);
  }
  await sql(url, `VACUUM ANALYZE ${table}`);
  await sql(url, 'CHECKPOINT');
}

/** Claim throughput (100k no-op jobs, concurrency 10) and start latency (500 single enqueues, 4 ms apart). */
async function claimCell(url: string, history: boolean) {
  const app = await boot(url, { workers: false, maintenance: { enabled: false } });
  const queue = app.get(QueueService);
  for (let i = 0; i < CLAIM_JOBS; i += 1_000) {
    await queue.enqueueMany(Array.from({ length: 1_000 }, () => ({ queue: 'bench', payload: { n: 1 } })));
  }
  await app.close();
  started = 0;
  // Maintenance on, as in an app (with history, the mover moves the jobs as they finish); a retention longer than the
  // retained jobs' ten days, so that the pruner deletes none of them meanwhile.
  const worker = await boot(url, { maintenance: { completedRetentionMs: 30 * DAY, history } });
  const t0 = performance.now();
  await waitUntil(() => started >= CLAIM_JOBS);
  const jobsPerSecond = CLAIM_JOBS / ((performance.now() - t0) / 1000);
  latencies = [];
  const q = worker.get(QueueService);
  for (let i = 0; i < 500; i++) {
    enqueuedAt.set(i, performance.now());
    await q.enqueue('bench', { n: 1, t: i });
    await new Promise((r) => setTimeout(r, 4));
  }
  await waitUntil(() => latencies.length >= 500);
  enqueuedAt.clear();
  await worker.close();
  return { jobsPerSecond, p50: pct(latencies, 50), p99: pct(latencies, 99) };
}

/** One day of `n` completed jobs, 30 days old: dropped as a partition (history), or deleted by the pruner's batches. */
async function pruneCell(url: string, n: number, history: boolean) {
  const day = `date_trunc('day', now() - interval '30 days', 'UTC')`;
  if (history) {
    await sql(url, `
      DO $$ DECLARE lo timestamptz := ${day}; BEGIN
        EXECUTE format('CREATE TABLE background_jobs_history_completed_p%s (LIKE background_jobs_history_completed)', to_char(lo AT TIME ZONE 'UTC', 'YYYYMMDD'));
        EXECUTE format('ALTER TABLE background_jobs_history_completed ATTACH PARTITION background_jobs_history_completed_p%s FOR VALUES FROM (%L) TO (%L)',
                       to_char(lo AT TIME ZONE 'UTC', 'YYYYMMDD'), lo, lo + interval '1 day');
      END $$`);
  }
  const table = history ? 'background_jobs_history' : 'background_jobs';
  await sql(url, `
    INSERT INTO ${table} (id, queue_name, payload, status, priority, run_at, attempts, max_attempts, fence_token, created_at, updated_at, finished_at, result, buffered)
    SELECT nextval(pg_get_serial_sequence('background_jobs', 'id')), 'bench', '{"n": 1}', 'completed', 0, t, 1, 3, 1, t, t, t, '{"ok": true}', false
    FROM (SELECT ${day} + (g::float8 / ${n}) * interval '23 hours' AS t FROM generate_series(1, ${n}) AS g) AS s`);
  await sql(url, `VACUUM ANALYZE ${table}`);
  const app = await boot(url, { workers: false, maintenance: { enabled: false, completedRetentionMs: 7 * DAY, pruneBatchSize: 5_000 } });
  const before = await wal(url);
  const t0 = performance.now();
  let partitions = 0;
  let deleted = 0;
  for (;;) {
    const r = await app.get(MaintenanceScheduler).pruner.runOnce();
    partitions += r.partitions;
    deleted += r.completed;
    if (r.completed === 0) break;
  }
  const ms = performance.now() - t0;
  const walBytes = Number((await wal(url)) - before);
  await app.close();
  await sql(url, `SELECT pg_stat_force_next_flush()`).catch(() => undefined);
  await new Promise((r) => setTimeout(r, 1_000));
  const [dead] = await sql<{ dead: string; rows: string }>(url, `
    SELECT coalesce(sum(n_dead_tup), 0)::text AS dead, (SELECT count(*) FROM background_jobs_all)::text AS rows
    FROM pg_stat_user_tables WHERE relname = 'background_jobs' OR relname LIKE 'background_jobs_history%'`);
  return { ms, partitions, deleted, walBytes, dead: Number(dead.dead), left: Number(dead.rows) };
}

/** `n` jobs through (enqueued in bulk, run by no-op handlers), history on or off: WAL per job and the hot table's size. */
async function throughCell(url: string, n: number, history: boolean) {
  const app = await boot(url, { maintenance: { enabled: true, history: history ? { moveIntervalMs: 1_000 } : false, pruneIntervalMs: 60_000 } });
  const queue = app.get(QueueService);
  started = 0;
  const before = await wal(url);
  const t0 = performance.now();
  for (let i = 0; i < n; i += 1_000) {
    await queue.enqueueMany(Array.from({ length: 1_000 }, () => ({ queue: 'bench', payload: { n: 1 } })));
    while (i - started > 50_000) await new Promise((r) => setTimeout(r, 10));
  }
  await waitUntil(() => started >= n);
  if (history) {
    await waitUntil(async () => (await sql<{ n: number }>(url, `SELECT count(*)::int AS n FROM background_jobs WHERE status = 'completed'`))[0].n === 0, 600_000);
  }
  const seconds = (performance.now() - t0) / 1000;
  const walBytes = Number((await wal(url)) - before);
  await app.close();
  await sql(url, `VACUUM background_jobs`);
  const [size] = await sql<{ hot: string; history: string }>(url, `
    SELECT pg_total_relation_size('background_jobs')::text AS hot,
      coalesce((SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c WHERE c.relname LIKE 'background_jobs_history_%_p%'), 0)::text AS history`);
  return { jobsPerSecond: n / seconds, walPerJob: walBytes / n, hotMb: Number(size.hot) / 1_048_576, historyMb: Number(size.history) / 1_048_576 };
}

/**
 * The two ways to move a finished job, compared where they differ (the settle statement and what follows it), in SQL
 * on `n` running jobs settled in batches of 100 as the outcome writer does: the settle UPDATE the library runs (then,
 * with history on, the mover's batches), against a settle that deletes the row and inserts it into history in one
 * statement. WAL bytes per job and the time of the statements.
 */
async function settleCell(url: string, n: number, how: 'update' | 'update+mover' | 'move-at-settle') {
  await sql(url, `TRUNCATE background_jobs`);
  await sql(url, `
    INSERT INTO background_jobs (queue_name, payload, status, attempts, locked_by, locked_at, lease_expires_at, fence_token, buffered)
    SELECT 'bench', '{"n": 1}', 'processing', 1, 'w', now(), now() + interval '30 seconds', 1, false FROM generate_series(1, ${n})`);
  await sql(url, `VACUUM ANALYZE background_jobs`);
  await sql(url, 'CHECKPOINT');
  const ids = (await sql<{ id: string }>(url, `SELECT id::text FROM background_jobs ORDER BY id`)).map((r) => r.id);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  // The settle-move's SELECT list: the row as the settle UPDATE would leave it, in background_jobs' column order.
  const settled: Record<string, string> = {
    status: `'completed'::background_job_status`, attempts: 'attempts + buffered::int', buffered: 'false', lease_expires_at: 'NULL', finished_at: 'now()', updated_at: 'now()',
  };
  const columns = (await sql<{ name: string }>(url, `SELECT column_name AS name FROM information_schema.columns WHERE table_name = 'background_jobs' AND table_schema = current_schema() ORDER BY ordinal_position`))
    .map((c) => settled[c.name] ?? c.name)
    .join(', ');
  const set = `status = 'completed', attempts = j.attempts + j.buffered::int, buffered = false, lease_expires_at = NULL, finished_at = now(), updated_at = now()`;
  const before = await wal(url);
  const t0 = performance.now();
  for (let i = 0; i < ids.length; i += 100) {
    const batch = ids.slice(i, i + 100);
    if (how === 'move-at-settle') {
      await client.query(`
        WITH d AS (DELETE FROM background_jobs AS j WHERE j.id = ANY($1::int8[]) AND j.status = 'processing' AND j.locked_by = 'w' RETURNING j.*)
        INSERT INTO background_jobs_history SELECT ${columns} FROM d`, [batch]);
    } else {
      await client.query(`UPDATE background_jobs AS j SET ${set} WHERE j.id = ANY($1::int8[]) AND j.status = 'processing' AND j.locked_by = 'w'`, [batch]);
    }
  }
  await client.end();
  if (how === 'update+mover') {
    const app = await boot(url, { workers: false, maintenance: { enabled: false, history: true } });
    const mover = app.get(MaintenanceScheduler).historyMover!;
    while ((await mover.runOnce()).moved > 0);
    await app.close();
  }
  const ms = performance.now() - t0;
  return { walPerJob: Number((await wal(url)) - before) / n, usPerJob: (ms * 1000) / n };
}

async function main() {
  const server = await startPostgres({ url: null, containers: false, durable: true, binDir: BIN || undefined, log: () => undefined });
  const [{ version }] = await sql<{ version: string }>(server.url, `SELECT current_setting('server_version') AS version`);
  const out = (line: string) => process.stdout.write(`${line}\n`);
  out(`# Partitioned history on PostgreSQL ${version} (durable: fsync and synchronous_commit on), ${new Date().toISOString()}`);
  let n = 0;
  const fresh = async () => {
    const url = await createDatabase(server.url, `history_bench_${n++}`);
    const app = await boot(url, { workers: false, maintenance: { enabled: false } });
    await app.close();
    return url;
  };
  try {
    out(`\n## Claim with ${f(RETAINED)} finished jobs retained (${f(CLAIM_JOBS)} no-op jobs at concurrency 10, then the start latency of 500 single enqueues; median of ${ROUNDS} interleaved rounds)`);
    out(`| finished jobs retained | history | jobs/s | vs none retained (same setting) | latency p50 (ms) | p99 (ms) |`);
    out(`|---|---|---|---|---|---|`);
    const cells = [
      { retained: 0, where: 'hot' as const, history: false },
      { retained: 0, where: 'history' as const, history: true },
      { retained: RETAINED, where: 'history' as const, history: true },
      { retained: RETAINED, where: 'hot' as const, history: false },
    ];
    const urls: string[] = [];
    for (const cell of cells) {
      const url = await fresh();
      const t0 = performance.now();
      await retain(url, cell.retained, cell.where);
      if (cell.retained > 0) process.stderr.write(`filled ${cell.where} in ${f((performance.now() - t0) / 1000)} s\n`);
      urls.push(url);
    }
    const runs: { jobsPerSecond: number; p50: number; p99: number }[][] = cells.map(() => []);
    for (let round = 0; round < ROUNDS; round++) {
      for (const [i, cell] of cells.entries()) {
        await sql(urls[i], 'CHECKPOINT');
        runs[i].push(await claimCell(urls[i], cell.history));
      }
    }
    const median = (values: number[]) => pct(values, 50);
    const rows = runs.map((r) => ({ jobsPerSecond: median(r.map((x) => x.jobsPerSecond)), p50: median(r.map((x) => x.p50)), p99: median(r.map((x) => x.p99)) }));
    for (const [i, cell] of cells.entries()) {
      const base = rows[cells.findIndex((c) => c.retained === 0 && c.history === cell.history)];
      const where = cell.retained === 0 ? 'none' : cell.where === 'history' ? `${f(cell.retained)} in background_jobs_history` : `${f(cell.retained)} in background_jobs`;
      out(`| ${where} | ${cell.history ? 'on' : 'off'} | ${f(rows[i].jobsPerSecond)} (${runs[i].map((x) => f(x.jobsPerSecond)).join(' / ')}) | ${f(rows[i].jobsPerSecond / base.jobsPerSecond, 2)}x | ${f(rows[i].p50, 1)} | ${f(rows[i].p99, 1)} |`);
    }

    out(`\n## Pruning a day of 1,000,000 completed jobs past retention`);
    out(`| how | time (ms) | WAL (MB) | dead tuples left | rows left |`);
    out(`|---|---|---|---|---|`);
    for (const history of [true, false]) {
      const cell = await pruneCell(await fresh(), 1_000_000, history);
      out(`| ${history ? `history: ${cell.partitions} partition dropped (DETACH CONCURRENTLY, DROP)` : `no history: ${f(cell.deleted)} rows deleted in batches of 5,000`} | ${f(cell.ms)} | ${f(cell.walBytes / 1_048_576, 1)} | ${f(cell.dead)} | ${f(cell.left)} |`);
    }

    out(`\n## ${f(THROUGH)} jobs through (bulk enqueue, no-op handlers at concurrency 10, retention 1 day)`);
    out(`| history | jobs/s | WAL per job (bytes) | hot table after (MB) | history after (MB) |`);
    out(`|---|---|---|---|---|`);
    for (const history of [false, true]) {
      const cell = await throughCell(await fresh(), THROUGH, history);
      out(`| ${history ? 'on (mover every 1 s)' : 'off'} | ${f(cell.jobsPerSecond)} | ${f(cell.walPerJob)} | ${f(cell.hotMb, 1)} | ${f(cell.historyMb, 1)} |`);
    }

    out(`\n## Moving at settle or in batches (${f(SETTLE_JOBS)} running jobs settled in batches of 100, SQL only, WAL per job)`);
    out(`| how | WAL per job (bytes) | statement time per job (µs) |`);
    out(`|---|---|---|`);
    const settleUrl = await fresh();
    // In this order: the mover of the second row makes today's partition, which the third row's statement writes into.
    for (const how of ['update', 'update+mover', 'move-at-settle'] as const) {
      const cell = await settleCell(settleUrl, SETTLE_JOBS, how);
      out(`| ${how === 'update' ? 'settle UPDATE (history off: what every job pays today)' : how === 'update+mover' ? 'settle UPDATE, then the mover (history on, as built)' : 'DELETE ... INSERT into history in the settle statement (not built)'} | ${f(cell.walPerJob)} | ${f(cell.usPerJob, 1)} |`);
    }
  } finally {
    await server.stop();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
