import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase } from '@internal/pg-harness';
import pg from 'pg';
import { buildCli, runCli } from './support/run-cli.js';

// Issue 43, "Jobs after enqueue", from the command line (the real binary against a real database): promote,
// set-priority and delay by id or by filter, with a dry run first; update-payload of one job. Asserted from the rows.
describe('pg-queue jobs promote / set-priority / delay / update-payload', () => {
  let url: string;
  let sql: pg.Pool;
  const cli = (...args: string[]) => runCli(args, { DATABASE_URL: url });
  const rows = async () =>
    (
      await sql.query<{ id: string; priority: number; due: boolean; v: number | null; status: string }>(
        `SELECT id::text, priority, run_at <= now() AS due, (payload ->> 'v')::int AS v, status::text FROM background_jobs ORDER BY id`,
      )
    ).rows;

  beforeAll(async () => {
    await buildCli();
    url = await createTestDatabase('cli_changes');
    sql = new pg.Pool({ connectionString: url, max: 2 });
    expect((await cli('migrate')).code).toBe(0);
  }, 180_000);
  afterAll(async () => {
    await sql?.end();
  });

  it('changes only jobs that have not started, by filter (after a dry run) or by id', async () => {
    await sql.query(`
      INSERT INTO background_jobs (queue_name, payload, status, run_at, priority) VALUES
        ('a', '{"v":1}', 'queued', now() + interval '1 hour', 0),
        ('a', '{"v":2}', 'queued', now() + interval '1 hour', 0),
        ('a', '{"v":3}', 'queued', now() - interval '1 minute', 0),
        ('b', '{"v":4}', 'queued', now() + interval '1 hour', 0)`);
    await sql.query(`INSERT INTO background_jobs (queue_name, payload, status, run_at, locked_by, lease_expires_at, attempts) VALUES ('a', '{"v":5}', 'processing', now(), 'w1', now() + interval '1 minute', 1)`);

    const dry = await cli('jobs', 'promote', '--queue', 'a', '--status', 'queued', '--dry-run');
    expect(dry).toEqual({ code: 0, stdout: 'dry run: would promote 3 job(s) of queue a, in status queued; nothing changed\n', stderr: '' });
    expect((await rows()).map((r) => r.due)).toEqual([false, false, true, false, true]);

    const promoted = await cli('jobs', 'promote', '--queue', 'a', '--status', 'queued', '--yes');
    expect(promoted).toEqual({ code: 0, stdout: 'promoted 2 job(s); 1 skipped (already due, or held by a worker that read it ahead)\n', stderr: '' });
    expect((await rows()).map((r) => r.due)).toEqual([true, true, true, false, true]);

    const priority = await cli('jobs', 'set-priority', '--to', '7', '--all', '--yes');
    expect(priority.code).toBe(0);
    expect(priority.stdout).toContain('changed the priority of 4 job(s)');
    // The running job keeps its priority.
    expect((await rows()).map((r) => r.priority)).toEqual([7, 7, 7, 7, 0]);

    const [, second] = await rows();
    const delayed = await cli('jobs', 'delay', second.id, '--by', '10m', '--yes');
    expect(delayed.code).toBe(0);
    const { rows: [d] } = await sql.query<{ ms: number }>(`SELECT (extract(epoch FROM run_at - now()) * 1000)::float8 AS ms FROM background_jobs WHERE id = $1`, [second.id]);
    expect(d.ms).toBeGreaterThan(590_000);
    expect(d.ms).toBeLessThanOrEqual(600_000);

    expect((await cli('jobs', 'delay', second.id, '--until', '2031-01-02T03:04:05Z', '--yes')).code).toBe(0);
    const { rows: [u] } = await sql.query<{ run_at: Date }>(`SELECT run_at FROM background_jobs WHERE id = $1`, [second.id]);
    expect(u.run_at).toEqual(new Date('2031-01-02T03:04:05Z'));
    const noSuchDay = await cli('jobs', 'delay', second.id, '--until', '2031-02-30', '--yes');
    expect(noSuchDay.code).toBe(2);
    expect(noSuchDay.stderr).toContain('February 2031 has 28 days');
    expect((await cli('jobs', 'delay', second.id, '--yes')).code).toBe(2);
    expect((await cli('jobs', 'set-priority', '--all', '--yes')).code).toBe(2);
  });

  it('update-payload replaces the payload of a waiting job, and refuses (exit 1, nothing changed) a running one or bad JSON', async () => {
    const [first] = await rows();
    const running = (await rows()).find((r) => r.status === 'processing')!;
    expect(await cli('jobs', 'update-payload', first.id, '{"v":42}')).toEqual({ code: 0, stdout: `job ${first.id}: payload replaced\n`, stderr: '' });
    const refused = await cli('jobs', 'update-payload', running.id, '{"v":42}');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`job ${running.id} is running`);
    const bad = await cli('jobs', 'update-payload', first.id, '{v:1}');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('not JSON');
    expect((await rows()).map((r) => r.v)).toEqual([42, 2, 3, 4, 5]);
  });
});
