// The fair claim's cost at scale (issue 42, part 1; docs/performance.md, "Fair share"): a table of --rows queued jobs
// over --keys keys, and the mean execution time of claimFairJobs next to the plain claim (claimJobs) and the keyed
// claim (claimKeyedJobs, concurrencyPerKey 1), for claims of each --sizes, each statement run --reps times in a
// transaction rolled back (the table never changes), in turn (so that noise on a shared machine falls on all three):
//
//   npm run claim-cost --workspace apps/bench -- [--rows 1000000] [--keys 10000] [--reps 200] [--sizes 10,50] [--pg-bin /usr/lib/postgresql/15/bin] [--keyless-look]
//     [--key-priorities PCT]
//     [--baseline-dist <another checkout>/packages/pg-queue/dist]
//
// The keyed and fair claims run as the workers send them while the queue's last look found no job without a key (no
// look: KEYLESS_LOOK_MS in claim-loop.ts); --keyless-look makes every one of them look (the claims before that gate).
// --key-priorities PCT gives PCT % of the jobs a priority of 1 to 3 (the rest 0): the keyed and fair claims then read
// each key's jobs of other priorities too (keyDue in claim-keyed.sql.ts; without it they probe once and find none).
//
// Two measures per statement: the server's own execution time (EXPLAIN (ANALYZE, TIMING OFF): no client, no network,
// no planning) and the round trip of the statement as the workers send it (named, so planned once), timed by the client.
// A throwaway server (embedded PostgreSQL 18, or the binaries of --pg-bin / PG_QUEUE_TEST_PG_BIN), removed at the end.
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import pg from 'pg';
import { PgQueueModule } from 'nestjs-pg-queue';
import { createDatabase, startPostgres } from '@internal/pg-harness';
import { toolArg, toolFlag } from '../host/tool-args.js';

// The claims' SQL and the limited claims' lock: internals, not in the package's exports, so loaded by path from its
// build; typed from its source.
type JobSql = typeof import('../../../../packages/pg-queue/src/store/job.sql.js');
type ClaimSql = typeof import('../../../../packages/pg-queue/src/store/claim.sql.js');
const { SQL }: JobSql = await import(new URL('../../../../packages/pg-queue/dist/store/job.sql.js', import.meta.url).href);
const { beginWithQueueLock }: ClaimSql = await import(new URL('../../../../packages/pg-queue/dist/store/claim.sql.js', import.meta.url).href);

const ROWS = Number(toolArg('--rows', '1000000'));
const KEYS = Number(toolArg('--keys', '10000'));
const REPS = Number(toolArg('--reps', '200'));
const SIZES = toolArg('--sizes', '10,50').split(',').map(Number);
const BIN = toolArg('--pg-bin', '') || undefined;
const LOOK = toolFlag('--keyless-look');
const KEY_PRIORITIES = Number(toolArg('--key-priorities', '0'));
/**
 * --baseline-dist DIR: another checkout's built library (its packages/pg-queue/dist): its keyed and fair claims are
 * measured beside this one's, in the same run, on the same table (a change to those statements, before and after).
 */
const BASELINE_DIST = toolArg('--baseline-dist', '');
const BASE_SQL: Record<string, string> | undefined = BASELINE_DIST
  ? ((await import(new URL(`file://${BASELINE_DIST.replace(/\/$/, '')}/store/job.sql.js`).href)) as JobSql).SQL
  : undefined;
/** Jobs running (processing, limited), spread over the keys, as a busy fair queue has: the window counts them per key. */
const RUNNING = 40;
const QUEUE = 'fair';

type Name = 'claimJobs' | 'claimKeyedJobs' | 'claimFairJobs' | 'baseKeyedJobs' | 'baseFairJobs';
const NAMES: Name[] = ['claimJobs', 'claimKeyedJobs', 'claimFairJobs', ...(BASE_SQL ? (['baseKeyedJobs', 'baseFairJobs'] as const) : [])];
const LABEL: Record<Name, string> = {
  claimJobs: 'plain claim (claimJobs)',
  claimKeyedJobs: 'keyed claim (claimKeyedJobs, concurrencyPerKey 1)',
  claimFairJobs: 'fair claim (claimFairJobs)',
  baseKeyedJobs: 'keyed claim, --baseline-dist',
  baseFairJobs: 'fair claim, --baseline-dist',
};
/** A cell's statement text: this checkout's, or the baseline's for the base* cells. */
const statementOf = (name: Name): string =>
  name === 'baseKeyedJobs' ? BASE_SQL!.claimKeyedJobs : name === 'baseFairJobs' ? BASE_SQL!.claimFairJobs : SQL[name];

const key = (n: number) => `k${String(n % KEYS).padStart(String(KEYS - 1).length, '0')}`;

/** The statement's values as the store sends them (claim.store.ts), the keyed claims from a random cursor. */
function values(name: Name, limit: number): unknown[] {
  const cursor = key(Math.floor(Math.random() * KEYS));
  if (name === 'claimJobs') return [QUEUE, limit, 'w', 30_000, limit, 30_000, 0, null];
  // The keyed and fair claims end with the worker's copy of the queue's stored limits (none); a baseline from before
  // that parameter takes one fewer: as many values as the statement's text has parameters.
  const all = name === 'claimKeyedJobs' || name === 'baseKeyedJobs' ? [QUEUE, limit, 'w', 30_000, null, null, 0, 1, cursor, LOOK, null] : [QUEUE, limit, 'w', 30_000, null, null, 0, null, cursor, '{}', 1, LOOK, limit, 30_000, null];
  return all.slice(0, parameterCount(statementOf(name)));
}

/** The highest $n a statement's text uses. */
const parameterCount = (text: string) => Math.max(...[...text.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));

/** One run of the statement in a transaction that is rolled back: the limited claims after the queue's lock, as the workers run them. */
async function once(client: pg.Client, name: Name, limit: number): Promise<{ execMs: number; roundTripMs: number; rows: number; buffers: number }> {
  const v = values(name, limit);
  await client.query(name === 'claimJobs' ? 'BEGIN' : beginWithQueueLock(1));
  try {
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, SUMMARY ON, COSTS OFF) ${statementOf(name)}`, v);
    const text = rows.map((r) => r['QUERY PLAN']).join('\n');
    const execMs = Number(/Execution Time: ([\d.]+) ms/.exec(text)?.[1]);
    // The top node's buffers (its children's and InitPlans' included): shared pages hit and read by the execution.
    const top = /Buffers: shared(?: hit=(\d+))?(?: read=(\d+))?/.exec(text);
    const buffers = Number(top?.[1] ?? 0) + Number(top?.[2] ?? 0);
    await client.query('ROLLBACK');
    await client.query(name === 'claimJobs' ? 'BEGIN' : beginWithQueueLock(1));
    const t0 = performance.now();
    const result = await client.query({ name: `cost_${name}`, text: statementOf(name), values: v });
    const roundTripMs = performance.now() - t0;
    return { execMs, roundTripMs, buffers, rows: result.rows.filter((r: { id: string | null }) => r.id !== null).length };
  } finally {
    await client.query('ROLLBACK');
  }
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))];

async function main(): Promise<void> {
  const server = await startPostgres({ url: null, containers: false, binDir: BIN, log: () => {} });
  try {
    const url = await createDatabase(server.url, 'claim_cost');
    // The schema, as the library migrates it.
    @Module({ imports: [PgQueueModule.forRoot({ connection: url, workers: false, maintenance: { enabled: false } })] })
    class SchemaModule {}
    const app = await NestFactory.createApplicationContext(SchemaModule, { logger: ['error'] });
    await app.close();
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const { rows: version } = await client.query<{ v: string }>(`SELECT version() AS v`);
      console.log(`${version[0].v.split(' on ')[0]}; ${ROWS.toLocaleString('en-US')} queued jobs over ${KEYS.toLocaleString('en-US')} keys, ${RUNNING} running; ${REPS} repetitions per cell; keyed and fair claims ${LOOK ? 'look' : 'do not look'} for jobs without a key; ${KEY_PRIORITIES} % of the jobs of priority 1 to 3`);
      const t0 = performance.now();
      // Keys interleaved (job g of key g % keys) and run_at spread 1 ms apart in the past, as jobs enqueued over time.
      await client.query(
        `INSERT INTO background_jobs (queue_name, payload, concurrency_key, priority, run_at, created_at, updated_at)
         SELECT $1, jsonb_build_object('i', g), 'k' || lpad((g % $3)::text, length(($3 - 1)::text), '0'),
           CASE WHEN (g::int8 * 7919) % 100 < $4::int THEN 1 + g % 3 ELSE 0 END, t.ts, t.ts, t.ts
         FROM generate_series(1, $2::int) AS g, LATERAL (SELECT now() - ($2::int - g) * interval '1 millisecond' AS ts) AS t`,
        [QUEUE, ROWS, KEYS, KEY_PRIORITIES],
      );
      await client.query(
        `UPDATE background_jobs SET status = 'processing', limited = true, attempts = 1, locked_by = 'other', locked_at = now(), lease_expires_at = now() + interval '1 hour'
         WHERE id IN (SELECT id FROM background_jobs WHERE queue_name = $1 ORDER BY id LIMIT $2)`,
        [QUEUE, RUNNING],
      );
      await client.query('VACUUM (ANALYZE) background_jobs');
      console.log(`filled and vacuumed in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
      // Warm-up: every statement a few times (caches, hint bits, the named statements prepared).
      for (const limit of SIZES) for (const name of NAMES) for (let i = 0; i < 10; i++) await once(client, name, limit);
      const lines = [
        '| claim | statement | rows | shared buffers, median | execution: mean | median | p10-p90 | mean vs plain | median vs plain | round trip: mean | median | p10-p90 | mean vs plain | median vs plain |',
        '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
      ];
      for (const limit of SIZES) {
        const samples = new Map<Name, { exec: number[]; rt: number[]; buf: number[]; rows: number }>(NAMES.map((n) => [n, { exec: [], rt: [], buf: [], rows: 0 }]));
        for (let r = 0; r < REPS; r++) {
          for (const name of NAMES) {
            const s = await once(client, name, limit);
            const cell = samples.get(name)!;
            cell.exec.push(s.execMs);
            cell.rt.push(s.roundTripMs);
            cell.buf.push(s.buffers);
            cell.rows = s.rows;
          }
        }
        const plain = samples.get('claimJobs')!;
        for (const name of NAMES) {
          const s = samples.get(name)!;
          const f = (xs: number[]) => xs.map((x) => x.toFixed(3));
          const cells = (xs: number[], ref: number[]) =>
            `${mean(xs).toFixed(3)} ms | ${pct(xs, 0.5).toFixed(3)} ms | ${f([pct(xs, 0.1), pct(xs, 0.9)]).join('-')} | ${(mean(xs) / mean(ref)).toFixed(2)}x | ${(pct(xs, 0.5) / pct(ref, 0.5)).toFixed(2)}x`;
          lines.push(`| ${limit} | ${LABEL[name]} | ${s.rows} | ${pct(s.buf, 0.5)} | ${cells(s.exec, plain.exec)} | ${cells(s.rt, plain.rt)} |`);
        }
      }
      console.log(lines.join('\n'));
      if (toolFlag('--plans')) {
        for (const name of NAMES) {
          await client.query(name === 'claimJobs' ? 'BEGIN' : beginWithQueueLock(1));
          const { rows } = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${statementOf(name)}`, values(name, SIZES[0]));
          await client.query('ROLLBACK');
          console.log(`\n${name}, a claim of ${SIZES[0]}:\n${rows.map((r) => r['QUERY PLAN']).join('\n')}`);
        }
      }
    } finally {
      await client.end();
    }
  } finally {
    await server.stop();
  }
}

await main();
