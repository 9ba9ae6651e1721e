import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase } from '@internal/pg-harness';
import { spawn } from 'node:child_process';
import pg from 'pg';
import { buildCli, CLI, runCli } from './support/run-cli.js';

// Issue 43, the event stream from the command line (the real binary against a real database): record-events opts a
// queue in (and out), `events` prints what the triggers recorded, filtered, from an id, as JSON, and --follow
// prints events committed after it started until interrupted. Jobs are enqueued and moved by SQL (no worker).
describe('pg-queue events', () => {
  let url: string;
  let sql: pg.Pool;
  const cli = (...args: string[]) => runCli(args, { DATABASE_URL: url });

  beforeAll(async () => {
    await buildCli();
    url = await createTestDatabase('cli_events');
    sql = new pg.Pool({ connectionString: url, max: 2 });
    expect((await cli('migrate')).code).toBe(0);
  }, 180_000);
  afterAll(async () => {
    await sql?.end();
  });

  it('opts a queue in, prints its events filtered and from an id, and refuses bad usage', async () => {
    expect(await cli('record-events', 'mail')).toEqual({ code: 0, stdout: 'queues recording events: mail\n', stderr: '' });
    const ids = (await sql.query<{ id: string }>(`SELECT pg_queue_enqueue(q, '{}')::text AS id FROM unnest(ARRAY['mail', 'mail', 'other']) AS q`)).rows.map((r) => r.id);
    await sql.query(`UPDATE background_jobs SET status = 'cancelled', finished_at = now() WHERE id = $1`, [ids[1]]);

    const all = await cli('events');
    expect(all.code).toBe(0);
    const lines = all.stdout.trim().split('\n');
    expect(lines.map((l) => l.split(/\s+/).slice(2, 5).join(' '))).toEqual([`mail enqueued job`, `mail enqueued job`, `mail cancelled job`]);
    expect(lines[2]).toContain(`job ${ids[1]} attempt 0`);

    const json = (await cli('events', '--type', 'cancelled', '--json')).stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(json).toEqual([expect.objectContaining({ type: 'cancelled', jobId: ids[1], queue: 'mail' })]);
    const firstId = lines[0].split(/\s+/)[0];
    expect((await cli('events', '--after', firstId, '--queue', 'mail')).stdout.trim().split('\n')).toEqual(lines.slice(1));

    const bad = await cli('events', '--after', '12');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--after="12"');
    expect((await cli('events', '--type', 'done')).code).toBe(2);
    expect(await cli('record-events', 'mail', '--off')).toEqual({ code: 0, stdout: 'no queue records events\n', stderr: '' });
  });

  it('--follow prints events committed after it started, until interrupted', async () => {
    await cli('record-events', 'follow');
    const child = spawn(process.execPath, [CLI, 'events', '--follow', '--queue', 'follow'], { env: { ...process.env, DATABASE_URL: url } });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    await new Promise((r) => setTimeout(r, 1_000));
    const id = (await sql.query<{ id: string }>(`SELECT pg_queue_enqueue('follow', '{}')::text AS id`)).rows[0].id;
    const deadline = Date.now() + 10_000;
    while (!out.includes(`job ${id}`) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    child.kill('SIGINT');
    expect(await exited).toBe(0);
    expect(out).toContain(`follow  enqueued  job ${id} attempt 0`);
  });
});
