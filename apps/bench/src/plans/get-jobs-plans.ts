// Why graphile-worker halves in the bench's process cell and not in an analysed backlog (issue 45; docs/performance.md,
// "Burst and analysed backlog: the plans"). The process cell starts each worker idle on a freshly migrated schema and
// bulk-inserts the jobs while it runs, so the claims run on a table whose statistics predate the burst (never
// analysed: autovacuum's analyse comes a minute later, after the cell). This tool fills each queue's table with
// --rows due jobs as the cell does, then shows each claim's plan and cost before and after VACUUM ANALYZE:
//
//   npm run get-jobs-plans --workspace apps/bench -- [--rows 100000] [--reps 30] [--pg-bin /usr/lib/postgresql/15/bin]
//
// graphile-worker's claim is its get_jobs statement as 0.18.0 builds it for a local queue of 500 (batchGetJobs in
// node_modules/graphile-worker/dist/sql/getJobs.js, named-queue strategy 2, no flags, database time), sent named as
// it sends it; ours is claimJobs (store/claim.sql.ts) as a worker with read-ahead sends it (a claim of 50). Each runs
// in a transaction rolled back, so the table never changes: EXPLAIN (ANALYZE, BUFFERS) once, then --reps timed round
// trips of the named statement (the sixth and later ones may use PostgreSQL's generic plan, as the workers' do).
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { makeWorkerUtils } from 'graphile-worker';
import pg from 'pg';
import { PgQueueModule } from 'nestjs-pg-queue';
import { createDatabase, startPostgres } from '@internal/pg-harness';
import { toolArg } from '../host/tool-args.js';

type JobSql = typeof import('../../../../packages/pg-queue/src/store/job.sql.js');
const { SQL }: JobSql = await import(new URL('../../../../packages/pg-queue/dist/store/job.sql.js', import.meta.url).href);

const ROWS = Number(toolArg('--rows', '100000'));
const REPS = Number(toolArg('--reps', '30'));
const BIN = toolArg('--pg-bin', '') || undefined;
const QUEUE = 'bench';

/** graphile-worker 0.18.0's get_jobs for a batch of 500 (see the header): $1 the worker id, $2 the task ids. */
const GET_JOBS = `with j_raw as (
  select jobs.job_queue_id, jobs.priority, jobs.run_at, jobs.id
    from "graphile_worker"._private_jobs as jobs
    where jobs.is_available = true
    and run_at <= now()
    and task_id = any($2::int[])
    and (
      jobs.job_queue_id is null
      or
      jobs.job_queue_id in (
        select id
        from "graphile_worker"._private_job_queues as job_queues
        where job_queues.is_available = true
        for update
        skip locked
      )
    )
    order by priority asc, run_at asc
    limit 500
    for update
    skip locked
),
j as (
  select distinct on (job_queue_id, case when job_queue_id is null then id end)
      job_queue_id, priority, run_at, id
    from j_raw
    order by job_queue_id, case when job_queue_id is null then id end, priority asc, run_at asc
),
q as (
  update "graphile_worker"._private_job_queues as job_queues
    set
      locked_by = $1::text,
      locked_at = now()
    from j
    where job_queues.id = j.job_queue_id
)
  update "graphile_worker"._private_jobs as jobs
    set
      attempts = jobs.attempts + 1,
      locked_by = $1::text,
      locked_at = now()
    from j
    where jobs.id = j.id
    returning *`;

interface Claim {
  label: string;
  name: string;
  text: string;
  values: unknown[];
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** The claim's plan (its scan of the jobs table, the rows it took, its buffers) and its round trips. */
async function measure(client: pg.Client, claim: Claim): Promise<{ plan: string; execMs: number; rows: number; rtMs: number }> {
  await client.query('BEGIN');
  const { rows } = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${claim.text}`, claim.values);
  await client.query('ROLLBACK');
  const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
  const times: number[] = [];
  let taken = 0;
  for (let i = 0; i < REPS; i++) {
    await client.query('BEGIN');
    const t0 = performance.now();
    const result = await client.query({ name: claim.name, text: claim.text, values: claim.values });
    times.push(performance.now() - t0);
    taken = result.rowCount ?? 0;
    await client.query('ROLLBACK');
  }
  return { plan, execMs: Number(/Execution Time: ([\d.]+) ms/.exec(plan)?.[1]), rows: taken, rtMs: median(times) };
}

/** The plan's lines that read a jobs table (the scans that decide the cost), shortened. */
const scans = (plan: string) =>
  plan
    .split('\n')
    .filter((l) => /Scan|Sort Method|Rows Removed/.test(l) && !/job_queues/.test(l))
    .map((l) => l.trim())
    .join('; ');

async function main(): Promise<void> {
  const server = await startPostgres({ url: null, containers: false, binDir: BIN, log: () => {} });
  try {
    const url = await createDatabase(server.url, 'get_jobs_plans');
    @Module({ imports: [PgQueueModule.forRoot({ connection: url, workers: false, maintenance: { enabled: false } })] })
    class SchemaModule {}
    await (await NestFactory.createApplicationContext(SchemaModule, { logger: ['error'] })).close();
    const pool = new pg.Pool({ connectionString: url, max: 4 });
    const utils = await makeWorkerUtils({ pgPool: pool });
    await utils.migrate();
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const { rows: version } = await client.query<{ v: string }>(`SELECT version() AS v`);
      // The burst, as the process cell enqueues it: graphile-worker's addJobs and our bulk insert, in chunks.
      const t0 = performance.now();
      for (let i = 0; i < ROWS; i += 5_000) {
        const n = Math.min(5_000, ROWS - i);
        await utils.addJobs(Array.from({ length: n }, (_, k) => ({ identifier: QUEUE, payload: { i: i + k } })));
      }
      await client.query(`INSERT INTO background_jobs (queue_name, payload) SELECT $1, jsonb_build_object('i', g) FROM generate_series(1, $2::int) AS g`, [QUEUE, ROWS]);
      const { rows: tasks } = await client.query<{ id: number }>(`SELECT id FROM graphile_worker._private_tasks WHERE identifier = $1`, [QUEUE]);
      console.log(`${version[0].v.split(' on ')[0]}; ${ROWS.toLocaleString('en-US')} due jobs in each queue (filled in ${((performance.now() - t0) / 1000).toFixed(1)} s); ${REPS} round trips per cell`);
      const claims: Claim[] = [
        { label: 'graphile-worker get_jobs (batch 500)', name: 'gw_get_jobs', text: GET_JOBS, values: ['w', tasks.map((t) => t.id)] },
        { label: 'nestjs-pg-queue claimJobs (50)', name: 'pq_claim', text: SQL.claimJobs, values: [QUEUE, 50, 'w', 30_000, 50, 30_000, 0, null] },
      ];
      const lines = ['| table statistics | claim | rows taken | execution (EXPLAIN ANALYZE) | round trip, median | the scans of the jobs table |', '|---|---|---|---|---|---|'];
      for (const state of ['never analysed (the burst)', 'after VACUUM ANALYZE (the analysed backlog)']) {
        if (state.startsWith('after')) await client.query('VACUUM ANALYZE graphile_worker._private_jobs, background_jobs');
        const { rows: stats } = await client.query<{ relname: string; reltuples: number }>(
          `SELECT relname, reltuples FROM pg_class WHERE relname IN ('_private_jobs', 'background_jobs') ORDER BY relname`,
        );
        console.log(`\n${state}: pg_class.reltuples ${stats.map((s) => `${s.relname} ${s.reltuples}`).join(', ')}`);
        for (const claim of claims) {
          const m = await measure(client, claim);
          lines.push(`| ${state} | ${claim.label} | ${m.rows} | ${m.execMs.toFixed(2)} ms | ${m.rtMs.toFixed(2)} ms | ${scans(m.plan)} |`);
          console.log(`\n${claim.label}, ${state}:\n${m.plan}`);
        }
      }
      console.log(`\n${lines.join('\n')}`);
    } finally {
      await client.end();
      await utils.release();
      await pool.end();
    }
  } finally {
    await server.stop();
  }
}

await main();
