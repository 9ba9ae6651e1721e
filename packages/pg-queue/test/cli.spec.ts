import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase } from '@internal/pg-harness';
import pg from 'pg';
import { PG_QUEUE_MIGRATIONS } from '../src/migrations/index.js';
import { buildCli, runCli } from './support/run-cli.js';

// The real binary (dist/cli/main.js, built by tsc -b) against a real database: output and exit codes.
describe('pg-queue command line', () => {
  let url: string;
  let sql: pg.Pool;
  const cli = (...args: string[]) => runCli(args, { DATABASE_URL: url });

  beforeAll(async () => {
    await buildCli();
    url = await createTestDatabase('cli');
    sql = new pg.Pool({ connectionString: url, max: 2 });
  }, 180_000);
  afterAll(async () => {
    await sql?.end();
  });

  it('--help lists the commands and exits 0; bad usage exits 2 with one line', async () => {
    const help = await runCli(['--help']);
    expect(help.code).toBe(0);
    for (const command of ['migrate', 'stats', 'jobs']) expect(help.stdout).toContain(command);

    const unknown = await runCli(['frobnicate']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("unknown command 'frobnicate'");

    const badStatus = await cli('jobs', 'list', '--status', 'done');
    expect(badStatus.code).toBe(2);
    expect(badStatus.stderr).toContain('expected one of queued, processing, completed, failed, cancelled');

    const badDuration = await cli('jobs', 'list', '--older-than', 'yesterday');
    expect(badDuration.code).toBe(2);
    expect(badDuration.stderr).toContain('is not a duration');

    const noUrl = await runCli(['stats']);
    expect(noUrl.code).toBe(2);
    expect(noUrl.stderr).toBe('pg-queue: no database: pass --url postgres://... or set DATABASE_URL\n');
  });

  it('never prints the password: a wrong one fails in one line (exit 1), masked even with --verbose', async () => {
    const secret = 'Sup3r-s3cret-pw';
    const wrong = new URL(url);
    wrong.password = secret;
    const result = await runCli(['--url', wrong.toString(), 'stats']);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^pg-queue: password authentication failed for user "[^"]+" \(28P01\)\n$/);
    expect(result.stdout + result.stderr).not.toContain(secret);

    // An unreachable server, with the stack, and the URL in the error text: still masked.
    const unreachable = `postgres://someone:${secret}@127.0.0.1:1/nowhere`;
    const verbose = await runCli(['--url', unreachable, '--verbose', 'migrate', 'status']);
    expect(verbose.code).toBe(1);
    expect(verbose.stderr).toContain('ECONNREFUSED');
    expect(verbose.stderr).toMatch(/^pg-queue: Error: connect ECONNREFUSED 127.0.0.1:1\n\s+at /); // the stack
    expect(verbose.stdout + verbose.stderr).not.toContain(secret);
  });

  it('migrate: status lists pending, up applies all, down undoes one step, up again re-applies it', async () => {
    const names = PG_QUEUE_MIGRATIONS.map((M) => new M().name!);
    const before = await cli('migrate', 'status', '--json');
    expect(before.code).toBe(0);
    expect(JSON.parse(before.stdout)).toEqual(names.map((name) => ({ name, applied: false })));
    expect((await sql.query(`SELECT to_regclass('migrations') AS t`)).rows[0].t).toBeNull(); // status wrote nothing

    const up = await cli('migrate');
    expect(up.code).toBe(0);
    expect(up.stdout).toBe(`applied ${names.length} migration(s): ${names.join(', ')}\n`);
    expect((await sql.query(`SELECT name FROM migrations ORDER BY id`)).rows.map((r) => r.name)).toEqual(names);

    const again = await cli('migrate', 'up');
    expect(again.stdout).toBe('schema is up to date: no pending queue migration\n');

    const down = await cli('migrate', 'down');
    expect(down.code).toBe(0);
    expect(down.stdout).toBe(`reverted ${names.at(-1)}\n`);
    expect((await sql.query(`SELECT name FROM migrations ORDER BY id`)).rows.map((r) => r.name)).toEqual(names.slice(0, -1));
    expect((await sql.query(`SELECT to_regclass('background_job_keys') AS t`)).rows[0].t).toBeNull();

    const status = await cli('migrate', 'status');
    expect(status.stdout).toContain(`${names.at(-1)}`);
    expect(status.stdout).toMatch(/UniqueJobs1764540000000\s+pending/);
    expect(status.stdout).toContain('1 pending: run `pg-queue migrate`');

    expect((await cli('migrate')).stdout).toBe(`applied 1 migration(s): ${names.at(-1)}\n`);
  });

  it('stats: a row per queue with its counts by status, paused queues marked; --json', async () => {
    await sql.query(`DELETE FROM background_jobs`);
    await sql.query(`
      INSERT INTO background_jobs (queue_name, payload, status, finished_at)
      SELECT 'mail', '{}', s, CASE WHEN s IN ('completed', 'failed', 'cancelled') THEN now() END
      FROM unnest(ARRAY['queued', 'queued', 'completed', 'failed']::background_job_status[]) AS s`);
    await sql.query(`INSERT INTO background_jobs (queue_name, payload) VALUES ('sms', '{}')`);
    await sql.query(`INSERT INTO background_queues (queue_name, paused) VALUES ('sms', true)`);

    const table = await cli('stats');
    expect(table.code).toBe(0);
    expect(table.stdout.split('\n').map((l) => l.replace(/\s+/g, ' '))).toEqual([
      'queue queued processing completed failed cancelled paused',
      expect.stringMatching(/^-+ -+ -+ -+ -+ -+ -+$/),
      'mail 2 0 1 1 0',
      'sms 1 0 0 0 0 yes',
      '',
    ]);
    const json = await cli('stats', '--json');
    expect(JSON.parse(json.stdout)).toEqual({
      queues: { mail: { queued: 2, processing: 0, completed: 1, failed: 1, cancelled: 0 }, sms: { queued: 1, processing: 0, completed: 0, failed: 0, cancelled: 0 } },
      paused: ['sms'],
    });
    await sql.query(`DELETE FROM background_queues`);
  });

  it('jobs list: filters (queue, status, older than, error text) and keyset pages; jobs show', async () => {
    await sql.query(`DELETE FROM background_jobs`);
    const { rows } = await sql.query<{ id: string }>(`
      INSERT INTO background_jobs (queue_name, payload, status, last_error, finished_at, created_at)
      VALUES ('mail', '{"to":"a"}', 'failed', 'SMTP timeout
  at send()', now(), now() - interval '2 hours'),
             ('mail', '{"to":"b"}', 'failed', 'mailbox full', now(), now()),
             ('mail', '{"to":"c"}', 'queued', NULL, NULL, now() - interval '3 hours'),
             ('sms', '{"to":"d"}', 'failed', 'smtp TIMEOUT', now(), now() - interval '3 hours')
      RETURNING id`);
    const [a, b, c, d] = rows.map((r) => r.id);
    const ids = async (...args: string[]) => {
      const result = await cli('jobs', 'list', '--json', ...args);
      expect(result.code).toBe(0);
      return result.stdout.trim().split('\n').filter(Boolean).map((line) => JSON.parse(line).id as string);
    };
    expect(await ids()).toEqual([a, b, c, d]);
    expect(await ids('--queue', 'mail')).toEqual([a, b, c]);
    expect(await ids('--status', 'failed')).toEqual([a, b, d]);
    expect(await ids('--status', 'failed', '--status', 'queued', '--queue', 'mail')).toEqual([a, b, c]);
    expect(await ids('--older-than', '1h')).toEqual([a, c, d]);
    expect(await ids('--error', 'smtp timeout')).toEqual([a, d]);
    expect(await ids('--error', 'smtp timeout', '--queue', 'mail', '--older-than', '90m')).toEqual([a]);
    // Keyset pages: --limit, then --after the last id.
    expect(await ids('--limit', '2')).toEqual([a, b]);
    expect(await ids('--limit', '2', '--after', b)).toEqual([c, d]);
    expect(await ids('--after', d)).toEqual([]);

    const table = await cli('jobs', 'list', '--limit', '2');
    expect(table.stdout).toMatch(/^id\s+queue\s+status\s+attempts\s+priority\s+run at\s+created at\s+last error\n/);
    expect(table.stdout).toContain('SMTP timeout\n'); // the first line of the error only
    expect(table.stdout).toContain(`next page: --after ${b}\n`);

    const show = await cli('jobs', 'show', a);
    expect(show.code).toBe(0);
    expect(show.stdout).toMatch(new RegExp(`^id\\s+${a}\\n`));
    expect(show.stdout).toContain('status          failed\n');
    expect(show.stdout).toContain('payload\n{\n  "to": "a"\n}\nlast error\nSMTP timeout\n  at send()\n');
    expect(JSON.parse((await cli('jobs', 'show', b, '--json')).stdout)).toMatchObject({ id: b, queue: 'mail', status: 'failed', payload: { to: 'b' }, lastError: 'mailbox full' });

    const missing = await cli('jobs', 'show', '999999');
    expect(missing).toEqual({ code: 1, stdout: '', stderr: 'pg-queue: job 999999 not found\n' });
    expect((await cli('jobs', 'show', 'abc')).code).toBe(2);
  });
});
