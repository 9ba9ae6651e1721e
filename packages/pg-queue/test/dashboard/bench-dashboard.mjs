#!/usr/bin/env node
// The dashboard against a table of a million jobs: times every page through HTTP, as a browser asks for it.
// A benchmark, not a test (no timing targets in tests); the target is under 200 ms per page.
//   npm run build && npm run bench:dashboard            (embedded PostgreSQL 18, in a temp folder)
//   DATABASE_URL=postgres://... npm run bench:dashboard  (a server of yours; creates database pgq_dashboard_bench)
//   ROWS=10000000 npm run bench:dashboard                (another size)
// Runs on the built output (dist), as an app would.
import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { createDatabase, startPostgres } from '@internal/pg-harness';
import { PgQueueModule, QueueService } from 'nestjs-pg-queue';
import { PgQueueDashboardModule } from 'nestjs-pg-queue/dashboard';
import pg from 'pg';

const ROWS = Number(process.env.ROWS ?? 1_000_000);
const RUNS = Number(process.env.RUNS ?? 20);
const TARGET_MS = 200;

const server = await startPostgres({ containers: false, log: () => {} });
const url = await createDatabase(server.url, 'pgq_dashboard_bench');
const db = new pg.Pool({ connectionString: url, max: 2 });
db.on('error', () => {});

class DashboardBenchModule {}
const app = await NestFactory.create(
  {
    module: DashboardBenchModule,
    imports: [
      PgQueueModule.forRoot({ connection: url, workers: false, maintenance: { enabled: false } }),
      PgQueueDashboardModule.forRoot({ path: 'dashboard', public: true }),
    ],
  },
  { logger: ['error'], abortOnError: false, forceCloseConnections: true },
);
await app.listen(0, '127.0.0.1');
const base = `http://127.0.0.1:${app.getHttpServer().address().port}/dashboard`;

try {
  const started = performance.now();
  // As test/dashboard-plans.spec.ts: three queues, mostly completed over the last day (a 24th in the last
  // hour), 1 % failed, 2 % queued (a seventh of them delayed, each with a unique key), one running.
  await db.query(
    `INSERT INTO background_jobs (queue_name, payload, status, attempts, run_at, finished_at, created_at, locked_by, unique_key, last_error)
     SELECT (ARRAY['emails', 'thumbnails', 'sync'])[1 + g % 3], jsonb_build_object('n', g, 'to', 'user' || g || '@example.com'),
            s.status::background_job_status, CASE WHEN s.status = 'queued' THEN 0 ELSE 1 END,
            CASE WHEN s.status = 'queued' AND g % 7 = 0 THEN now() + interval '1 hour' ELSE now() - interval '2 hours' END,
            CASE WHEN s.status IN ('completed', 'failed') THEN now() - (g % 1440 || ' minutes')::interval END,
            now() - interval '1 day', CASE WHEN s.status = 'processing' THEN 'worker-1' END,
            CASE WHEN s.status = 'queued' THEN 'key-' || g END, CASE WHEN s.status = 'failed' THEN 'Error: boom' || E'\\n    at x (y.ts:1:1)' END
     FROM generate_series(1, $1::int) AS g,
          LATERAL (SELECT CASE WHEN g % 100 = 0 THEN 'failed' WHEN g % 50 = 1 THEN 'queued' WHEN g = 77777 THEN 'processing' ELSE 'completed' END AS status) AS s`,
    [ROWS],
  );
  await db.query('VACUUM ANALYZE background_jobs');
  await app.get(QueueService).upsertSchedule({ name: 'nightly-report', cron: '0 3 * * *', queue: 'reports' });
  const { rows: version } = await db.query('SHOW server_version');
  console.log(`${ROWS.toLocaleString('en')} jobs inserted and analysed in ${((performance.now() - started) / 1000).toFixed(1)} s; PostgreSQL ${version[0].server_version}`);

  const half = String(Math.floor(ROWS / 2));
  const pages = [
    ['overview', '/'],
    ['summary (auto-refresh)', '/api/summary'],
    ['jobs, newest', '/jobs'],
    ['jobs of a queue', '/jobs?queue=sync'],
    ['failed jobs', '/jobs?status=failed'],
    ['queued of a queue', '/jobs?queue=emails&status=queued'],
    ['running (rare: 1 row)', '/jobs?status=processing'],
    ['jobs, an older page', `/jobs?before=${half}`],
    ['search by id', `/jobs?q=${half}`],
    ['search by unique key', '/jobs?q=key-51'],
    ['job detail', `/jobs/${half}`],
    ['recurring jobs', '/schedules'],
  ];
  const results = [];
  for (const [name, path] of pages) {
    const times = [];
    for (let i = 0; i < RUNS + 3; i++) {
      const t0 = performance.now();
      const response = await fetch(`${base}${path}`);
      await response.text();
      if (response.status !== 200) throw new Error(`${path}: HTTP ${response.status}`);
      if (i >= 3) times.push(performance.now() - t0);
    }
    times.sort((a, b) => a - b);
    const at = (q) => times[Math.min(times.length - 1, Math.floor(q * times.length))];
    results.push({ page: name, path, median_ms: +at(0.5).toFixed(1), p95_ms: +at(0.95).toFixed(1), max_ms: +times[times.length - 1].toFixed(1), under_target: at(0.95) < TARGET_MS });
  }
  console.table(results);
  const slow = results.filter((r) => !r.under_target);
  console.log(slow.length ? `over ${TARGET_MS} ms at p95: ${slow.map((r) => r.page).join(', ')}` : `every page under ${TARGET_MS} ms at p95 (${RUNS} runs each, after 3 warm-up runs)`);
} finally {
  await app.close();
  await db.end();
  await server.stop();
}
