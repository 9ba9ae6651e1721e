import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { createTestDatabase } from '@internal/pg-harness';
import { buildWorker, type WorkerBuild } from './faults/support/build-worker.js';
import { forkLoaded, startForked } from './support/serve-start.js';
import { sqlPool, waitFor } from './support/test-app.js';

// Several databases across OS processes: two worker processes, each an app with the default PgQueueModule on one
// database and a named one on another, run both databases' queues while a producer process enqueues to both through
// one QueueService; one worker is killed (SIGKILL) mid-way. Every assertion reads the two databases' tables.
describe('several databases across processes, one of them killed', () => {
  let build: WorkerBuild;
  let main: pg.Pool;
  let reports: pg.Pool;
  const children: ChildProcess[] = [];

  async function spawn(urls: { url: string; reportsUrl: string }, role: 'worker' | 'producer'): Promise<ChildProcess> {
    const child = await forkLoaded(build.script);
    children.push(child);
    return startForked(child, { ...urls, role });
  }

  beforeAll(async () => {
    build = await buildWorker([fileURLToPath(new URL('./databases/two-databases-process.ts', import.meta.url))]);
  });
  afterAll(async () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await main?.end();
    await reports?.end();
    await build?.remove();
  });

  it('each database runs its own jobs on both processes; after the kill, every job completes in its own database, and only jobs the killed process held ran twice', async () => {
    const [url, reportsUrl] = await Promise.all([createTestDatabase('sd_processes_main'), createTestDatabase('sd_processes_reports')]);
    main = sqlPool(url);
    reports = sqlPool(reportsUrl);
    for (const db of [main, reports]) await db.query(`CREATE TABLE runs (job_id bigint NOT NULL, pid int NOT NULL)`);
    // The first process migrates both databases; the others find them ready.
    const doomed = await spawn({ url, reportsUrl }, 'worker');
    await spawn({ url, reportsUrl }, 'worker');
    const producer = await spawn({ url, reportsUrl }, 'producer');
    for (const db of [main, reports]) {
      await waitFor('both workers LISTEN on each database', async () => {
        const { rows } = await db.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'nestjs-pg-queue listener' AND datname = current_database()`);
        return rows[0].n === 2;
      });
    }

    const JOBS = 400;
    const ids = await new Promise<{ main: string[]; reports: string[] }>((resolve, reject) => {
      producer.on('message', (m: { type: string; main: string[]; reports: string[]; error?: string }) => {
        if (m.type !== 'enqueued') return;
        if (m.error) reject(new Error(m.error));
        else resolve(m);
      });
      producer.send({ type: 'enqueue', jobs: JOBS });
    });
    const runs = async (db: pg.Pool) => (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM runs`)).rows[0].n;
    await waitFor('both databases a quarter through', async () => (await runs(main)) >= JOBS / 4 && (await runs(reports)) >= JOBS / 4, 30_000, 5);
    doomed.kill('SIGKILL');
    const done = async (db: pg.Pool) => (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_jobs WHERE status = 'completed'`)).rows[0].n;
    await waitFor('every job of both databases completed', async () => (await done(main)) === JOBS && (await done(reports)) === JOBS, 60_000, 50);

    for (const [db, queue, own] of [[main, 'sd-main', ids.main], [reports, 'sd-reports', ids.reports]] as const) {
      // The database holds its own queue's jobs, every one completed, and no job of the other queue.
      const { rows: held } = await db.query(`SELECT queue_name AS queue, status, count(*)::int AS n FROM background_jobs GROUP BY 1, 2`);
      expect(held).toEqual([{ queue, status: 'completed', n: JOBS }]);
      const { rows: [stored] } = await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE id = ANY($1::int8[])`, [own]);
      expect(stored.n).toBe(JOBS);
      // Every job ran. What the kill cut short was in the killed process (running, or finished with its outcome not
      // yet written): a job ran twice only if one of its runs was there, and never three times. An attempt was charged
      // per run, give or take one: a job that started from the buffer and died there before its row learnt it started
      // (docs/concepts.md, The life of a held job) ran once uncharged, and a job charged at its start may have died
      // before it wrote its run.
      const { rows: [ledger] } = await db.query(
        `WITH per_job AS (
           SELECT j.id, j.attempts, count(r.job_id)::int AS runs, coalesce(bool_or(r.pid = $1), false) AS in_doomed
           FROM background_jobs AS j LEFT JOIN runs AS r ON r.job_id = j.id GROUP BY j.id, j.attempts)
         SELECT count(*) FILTER (WHERE runs >= 1)::int AS ran,
                count(*) FILTER (WHERE runs > 1)::int AS twice,
                count(*) FILTER (WHERE runs > 2)::int AS more,
                count(*) FILTER (WHERE runs > 1 AND NOT in_doomed)::int AS twice_elsewhere,
                count(*) FILTER (WHERE attempts < runs - 1 OR attempts > runs + 1)::int AS miscounted,
                count(*) FILTER (WHERE attempts < runs AND NOT in_doomed)::int AS uncharged_elsewhere,
                count(*) FILTER (WHERE runs > 1 OR attempts <> runs)::int AS cut_short
         FROM per_job`,
        [doomed.pid],
      );
      expect(ledger).toMatchObject({ ran: JOBS, more: 0, twice_elsewhere: 0, miscounted: 0, uncharged_elsewhere: 0 });
      // Both processes ran this database's jobs.
      const { rows: pids } = await db.query<{ pid: number }>(`SELECT DISTINCT pid FROM runs ORDER BY pid`);
      expect(pids).toHaveLength(2);
      console.log(`${queue}: ${JOBS} jobs, ${ledger.twice} ran twice, ${ledger.cut_short} cut short by the kill`);
    }
    for (const child of children) if (child !== doomed) child.kill('SIGTERM');
  }, 120_000);
});
