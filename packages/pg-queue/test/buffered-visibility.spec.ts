import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Module, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type pg from 'pg';
import { Registry } from 'prom-client';
import { PgQueueModule, QueueService } from 'nestjs-pg-queue';
import { PgQueueDashboardModule } from 'nestjs-pg-queue/dashboard';
import { PgQueueHealthIndicator, PgQueueHealthModule } from 'nestjs-pg-queue/health';
import { PgQueueMetricsModule } from 'nestjs-pg-queue/metrics';
import { createTestDatabase } from '@internal/pg-harness';
import { JobStore } from '../src/store/job.store.js';
import { MetricsStore } from '../src/store/metrics.store.js';
import { TestKitStore } from '../src/store/test-kit.store.js';
import { parsePrometheusText, sampleValue } from './support/prometheus-text.js';
import { buildCli, runCli } from './support/run-cli.js';
import { sqlPool } from './support/test-app.js';

/**
 * Issue 17, item 8: a buffered job (status 'processing' with buffered = true: claimed into a worker's read-ahead
 * buffer, not started, not charged an attempt; docs/concepts.md, The life of a held job) is waiting, and every
 * report of job states says so: stats(), the dashboard, the Prometheus gauges, checkLag, the command line, get()
 * and the testing kit. The rows are written with SQL, beside truly running rows (buffered = false); no worker
 * runs and maintenance is off, so nothing moves them.
 *
 * vis-a: 3 buffered (worker w1), 2 running (w2), 1 queued for later: 4 waiting, 2 running, nothing due but the
 *        buffered jobs.
 * vis-b: a frozen worker's full buffer: 2 buffered jobs due 10 minutes ago, nothing queued, nothing running.
 * vis-c: 1 buffered job whose (short) lease ended an hour ago: its holder died and no sweeper ran.
 */
describe('buffered jobs (read ahead, not started) are reported as waiting', () => {
  let url: string;
  let db: pg.Pool;
  let app: INestApplication;
  let base: string;
  const ids: { buffered: string[]; running: string[]; queued: string[]; frozen: string[]; expired: string[] } = { buffered: [], running: [], queued: [], frozen: [], expired: [] };

  const insert = async (rows: string): Promise<string[]> => (await db.query<{ id: string }>(`${rows} RETURNING id::text`)).rows.map((r) => r.id);

  beforeAll(async () => {
    await buildCli();
    url = await createTestDatabase('bufvis');
    db = sqlPool(url);

    @Module({
      imports: [
        PgQueueModule.forRoot({ connection: url, workers: false, maintenance: { enabled: false } }),
        PgQueueMetricsModule.forRoot({ register: new Registry(), depthCacheMs: 0 }),
        PgQueueHealthModule,
        PgQueueDashboardModule.forRoot({ path: 'dash', public: true }),
      ],
    })
    class VisibilityAppModule {}
    app = await NestFactory.create(VisibilityAppModule, { logger: ['error'], abortOnError: false, forceCloseConnections: true });
    await app.listen(0, '127.0.0.1');
    base = `http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}`;

    ids.buffered = await insert(`
      INSERT INTO background_jobs (queue_name, payload, status, buffered, attempts, locked_by, locked_at, lease_expires_at, run_at, unique_key)
      SELECT 'vis-a', jsonb_build_object('n', g), 'processing', true, 0, 'w1', now() - interval '1 s', now() + interval '5 min', now() - interval '10 min', 'bk-' || g
      FROM generate_series(1, 3) AS g`);
    ids.running = await insert(`
      INSERT INTO background_jobs (queue_name, payload, status, buffered, attempts, locked_by, locked_at, lease_expires_at, run_at)
      SELECT 'vis-a', jsonb_build_object('n', g), 'processing', false, 1, 'w2', now() - interval '1 s', now() + interval '30 s', now() - interval '1 min'
      FROM generate_series(4, 5) AS g`);
    ids.queued = await insert(`INSERT INTO background_jobs (queue_name, payload, run_at) VALUES ('vis-a', '{"n": 6}', now() + interval '1 hour')`);
    ids.frozen = await insert(`
      INSERT INTO background_jobs (queue_name, payload, status, buffered, attempts, locked_by, locked_at, lease_expires_at, run_at)
      SELECT 'vis-b', jsonb_build_object('n', g), 'processing', true, 0, 'w1', now() - interval '2 s', now() + interval '5 min', now() - interval '10 min'
      FROM generate_series(1, 2) AS g`);
    ids.expired = await insert(`
      INSERT INTO background_jobs (queue_name, payload, status, buffered, attempts, locked_by, locked_at, lease_expires_at, run_at)
      VALUES ('vis-c', '{}', 'processing', true, 0, 'w3', now() - interval '1 hour', now() - interval '1 hour', now() - interval '1 hour')`);
  }, 180_000);

  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  const expected = {
    'vis-a': { queued: 4, blocked: 0, processing: 2, completed: 0, failed: 0, cancelled: 0 },
    'vis-b': { queued: 2, blocked: 0, processing: 0, completed: 0, failed: 0, cancelled: 0 },
    'vis-c': { queued: 1, blocked: 0, processing: 0, completed: 0, failed: 0, cancelled: 0 },
  };

  it('stats(): buffered jobs count as queued, only the started ones as processing', async () => {
    expect(await app.get(QueueService).stats()).toEqual(expected);
  });

  it('stats() above its exact cap (the sampled estimate): buffered jobs still count as queued', async () => {
    // A cap of 2 is below the 8 in-flight rows: running and buffered counts both come from the sample (the whole
    // of this small table), and are marked as estimates.
    const stats = await new JobStore(db).countByStatus(2);
    expect({ queued: stats['vis-a'].queued, processing: stats['vis-a'].processing }).toEqual({ queued: 4, processing: 2 });
    expect({ queued: stats['vis-b'].queued, processing: stats['vis-b'].processing }).toEqual({ queued: 2, processing: 0 });
    expect(stats['vis-a'].approximate).toEqual(expect.arrayContaining(['queued', 'processing']));
  });

  it('get() and the testing kit: a buffered job reads as queued, its holder still named', async () => {
    const job = await app.get(QueueService).get(ids.buffered[0]);
    expect({ status: job?.status, lockedBy: job?.lockedBy, attempts: job?.attempts }).toEqual({ status: 'queued', lockedBy: 'w1', attempts: 0 });
    expect((await app.get(QueueService).get(ids.running[0]))?.status).toBe('processing');
    const listed = await new TestKitStore(db).listJobs(['vis-a']);
    expect(Object.fromEntries(listed.map((j) => [j.id, j.status]))).toEqual({
      ...Object.fromEntries(ids.buffered.map((id) => [id, 'queued'])),
      ...Object.fromEntries(ids.running.map((id) => [id, 'processing'])),
      [ids.queued[0]]: 'queued',
    });
  });

  it('Prometheus: the state gauge counts buffered jobs as queued, and a frozen buffer shows in the oldest-due age', async () => {
    const res = await fetch(`${base}/metrics`);
    expect(res.status).toBe(200);
    const samples = parsePrometheusText(await res.text());
    const jobs = (queue: string, state: string) => sampleValue(samples, 'pg_queue_jobs', { queue, state });
    expect([jobs('vis-a', 'queued'), jobs('vis-a', 'processing')]).toEqual([4, 2]);
    expect([jobs('vis-b', 'queued'), jobs('vis-b', 'processing')]).toEqual([2, 0]);
    expect(sampleValue(samples, 'pg_queue_oldest_due_job_age_seconds', { queue: 'vis-b' })).toBeGreaterThanOrEqual(595);
    // vis-a's only queued job is for later: its age is its buffered jobs' (due 10 minutes ago).
    expect(sampleValue(samples, 'pg_queue_oldest_due_job_age_seconds', { queue: 'vis-a' })).toBeGreaterThanOrEqual(595);
  });

  it('the depth snapshot above its exact cap (sampled): buffered jobs still count as queued', async () => {
    const { queues } = await new MetricsStore(db).depthSnapshot(2, 1_000, 30_000);
    expect({ queued: queues['vis-a'].counts.queued, processing: queues['vis-a'].counts.processing }).toEqual({ queued: 4, processing: 2 });
    expect({ queued: queues['vis-b'].counts.queued, processing: queues['vis-b'].counts.processing }).toEqual({ queued: 2, processing: 0 });
    expect(queues['vis-a'].approximate).toEqual(expect.arrayContaining(['queued', 'processing']));
  });

  it('checkLag: a queue whose due jobs sit in a frozen worker\'s buffer lags from their run_at', async () => {
    const result = await app.get(PgQueueHealthIndicator).checkLag('lag', { maxLagMs: { 'vis-b': 60_000 } });
    expect(result.lag.status).toBe('down');
    expect((result.lag.lagMs as Record<string, number>)['vis-b']).toBeGreaterThanOrEqual(595_000);
    expect(String(result.lag.message)).toContain('"vis-b" lags');
  });

  describe('the dashboard', () => {
    const page = async (path: string) => {
      const res = await fetch(`${base}/dash${path}`);
      expect([path, res.status]).toEqual([path, 200]);
      return res.text();
    };
    /** The jobs list's rows: id -> the status its badge shows. */
    const listed = (body: string) => Object.fromEntries([...body.matchAll(/<tr data-job="(\d+)">[\s\S]*?<span class="status status-[a-z]+">([a-z]+)<\/span>/g)].map((m) => [m[1], m[2]]));

    it('the summary JSON and the overview count buffered jobs as queued (and due) and show the frozen buffer\'s wait', async () => {
      const summary = JSON.parse(await page('/api/summary')) as { counts: Record<string, Record<string, number>> };
      // Queued split into due and scheduled: a buffered job is due (it was claimed); vis-a's one plain queued job waits for later.
      const split: Record<string, { due: number; scheduled: number }> = { 'vis-a': { due: 3, scheduled: 1 }, 'vis-b': { due: 2, scheduled: 0 }, 'vis-c': { due: 1, scheduled: 0 } };
      expect(summary.counts).toEqual(Object.fromEntries(Object.entries(expected).map(([q, counts]) => [q, { ...counts, ...split[q] }])));
      const overview = await page('');
      const cell = (queue: string, status: string) => overview.match(new RegExp(`data-count="${queue}\\|${status}"[^>]*>([^<]*)<`))?.[1];
      expect([cell('vis-a', 'due'), cell('vis-a', 'scheduled'), cell('vis-a', 'processing'), cell('vis-b', 'due'), cell('vis-b', 'processing')]).toEqual(['3', '1', '2', '2', '0']);
      expect(overview.match(/data-oldest="vis-b"[^>]*>([^<]*)</)?.[1]).toMatch(/^10 min \d+ s$/);
    });

    it('the jobs list: a buffered job shows as due, and is listed under queued (and due), not under processing', async () => {
      const queued = listed(await page('/jobs?queue=vis-a&status=queued'));
      expect(queued).toEqual({ ...Object.fromEntries(ids.buffered.map((id) => [id, 'due'])), [ids.queued[0]]: 'scheduled' });
      expect(listed(await page('/jobs?queue=vis-a&status=due'))).toEqual(Object.fromEntries(ids.buffered.map((id) => [id, 'due'])));
      const running = listed(await page('/jobs?status=processing'));
      expect(running).toEqual(Object.fromEntries(ids.running.map((id) => [id, 'processing'])));
      const all = listed(await page('/jobs?queue=vis-b'));
      expect(all).toEqual(Object.fromEntries(ids.frozen.map((id) => [id, 'due'])));
      // The search by unique key uses the same columns.
      expect(listed(await page('/jobs?q=bk-2'))).toEqual({ [ids.buffered[1]]: 'due' });
    });

    it('the job page: a buffered job reads as due (queued), read ahead by its worker; a running one as processing', async () => {
      const buffered = await page(`/jobs/${ids.buffered[0]}`);
      expect(buffered).toContain('<span class="status status-due">due</span>');
      expect(buffered).not.toContain('status-processing');
      expect(buffered).toContain('read ahead by w1');
      const running = await page(`/jobs/${ids.running[0]}`);
      expect(running).toContain('<span class="status status-processing">processing</span>');
      expect(running).not.toContain('read ahead');
    });
  });

  describe('the command line', () => {
    const cli = (...args: string[]) => runCli(args, { DATABASE_URL: url });

    it('stats: buffered jobs count as queued', async () => {
      const json = await cli('stats', '--json');
      expect(json.code).toBe(0);
      expect((JSON.parse(json.stdout) as { queues: unknown }).queues).toEqual(expected);
      const table = await cli('stats');
      const row = table.stdout.split('\n').find((l) => l.startsWith('vis-b'));
      // queue, queued, processing, completed, failed, cancelled
      expect(row?.trim().split(/\s+/).slice(0, 6)).toEqual(['vis-b', '2', '0', '0', '0', '0']);
    });

    it('jobs list --status queued lists buffered jobs (as queued); --status processing only the started ones', async () => {
      const list = async (...args: string[]) => {
        const result = await cli('jobs', 'list', '--json', ...args);
        expect(result.code).toBe(0);
        return Object.fromEntries(result.stdout.trim().split('\n').filter(Boolean).map((line) => JSON.parse(line) as { id: string; status: string }).map((j) => [j.id, j.status]));
      };
      expect(await list('--queue', 'vis-a', '--status', 'queued')).toEqual({ ...Object.fromEntries(ids.buffered.map((id) => [id, 'queued'])), [ids.queued[0]]: 'queued' });
      expect(await list('--status', 'processing')).toEqual(Object.fromEntries(ids.running.map((id) => [id, 'processing'])));
      const shown = await cli('jobs', 'show', ids.frozen[0], '--json');
      expect((JSON.parse(shown.stdout) as { status: string }).status).toBe('queued');
    });

    it('doctor: a lapsed lease of a read-ahead job is not called a running job', async () => {
      const result = await cli('doctor');
      const leases = result.stdout.split('\n').find((l) => /^\S+\s+leases\b/.test(l));
      expect(leases).toMatch(/^warn\s+leases\s+1 read-ahead job\(s\), never started, whose lease ended/);
    });
  });

  // Last: it changes the rows. A guard for the split of in-flight rows (it passed before the split too).
  it('the depth snapshot past the cap, with no buffered job left: buffered jobs are estimated at 0, under no nameless queue', async () => {
    await db.query(`UPDATE background_jobs SET buffered = false WHERE buffered`);
    const { queues } = await new MetricsStore(db).depthSnapshot(2, 1_000, 30_000);
    expect(Object.keys(queues).sort()).toEqual(['vis-a', 'vis-b', 'vis-c']);
    expect(Object.fromEntries(Object.entries(queues).map(([q, d]) => [q, [d.counts.queued, d.counts.processing]]))).toEqual({ 'vis-a': [1, 5], 'vis-b': [0, 2], 'vis-c': [0, 1] });
  });
});
