import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase, pgBouncerAvailable, startPgBouncer, withDatabaseName } from '@internal/pg-harness';
import pg from 'pg';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PG_QUEUE_MIGRATIONS } from '../src/migrations/index.js';
import { spawnSync } from 'node:child_process';
import net from 'node:net';
import { CANNOT_CONNECT, CONNECT_TIMEOUT, PASSWORD_IN_URL } from '../src/cli/cli.messages.js';

/** What `migrate down` says undoing the last migration (KeyPriorities) does. */
const LAST_DOWN =
  "drops the index background_jobs_key_priority_idx (the keyed and fair claims then take each key's jobs by run_at alone, whatever their priority, as before)";
import { buildCli, runCli, runCliOnTerminal } from './support/run-cli.js';

// The real binary (dist/cli/main.js, built by tsc -b) against a real database: output and exit codes.
describe('pg-queue command line', () => {
  let url: string;
  let sql: pg.Pool;
  const cli = (...args: string[]) => runCli(args, { DATABASE_URL: url });

  beforeAll(async () => {
    await buildCli();
    url = await createTestDatabase('cli');
    sql = new pg.Pool({ connectionString: url, max: 2 });
    sql.on('error', () => undefined);
  }, 180_000);
  afterAll(async () => {
    await sql?.end();
  });

  it('stays out of the library: no module outside src/cli imports it (apps that never run it load none of it)', async () => {
    const src = fileURLToPath(new URL('../src/', import.meta.url));
    const files = (await readdir(src, { recursive: true })).filter((f) => f.endsWith('.ts') && !f.startsWith('cli/'));
    const importers = [];
    for (const file of files) if (/from '[./]*cli\//.test(await readFile(join(src, file), 'utf8'))) importers.push(file);
    expect(importers).toEqual([]);
  });

  it('--help lists the commands and exits 0; bad usage exits 2 with one line', async () => {
    const help = await runCli(['--help']);
    expect(help.code).toBe(0);
    for (const command of ['migrate', 'stats', 'jobs', 'enqueue', 'pause', 'resume', 'limits', 'prune', 'doctor', 'schedules', 'flows']) expect(help.stdout).toMatch(new RegExp(`^  ${command}`, 'm'));
    const jobsHelp = await runCli(['jobs', 'retry', '--help']);
    expect(jobsHelp.stdout).toContain('--dry-run');

    const unknown = await runCli(['frobnicate']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("unknown command 'frobnicate'");

    const badStatus = await cli('jobs', 'list', '--status', 'done');
    expect(badStatus.code).toBe(2);
    expect(badStatus.stderr).toContain('expected one of queued, blocked, processing, completed, failed, cancelled');

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
    const [warning, ...error] = result.stderr.split(/(?<=\n)/);
    expect(warning).toBe(`pg-queue: ${PASSWORD_IN_URL()}\n`);
    expect(error.join('')).toMatch(/^pg-queue: password authentication failed for user "[^"]+" \(28P01\)\n$/);
    expect(result.stdout + result.stderr).not.toContain(secret);

    // An unreachable server, with the stack, and the URL in the error text: still masked.
    const unreachable = `postgres://someone:${secret}@127.0.0.1:1/nowhere`;
    const verbose = await runCli(['--url', unreachable, '--verbose', 'migrate', 'status']);
    expect(verbose.code).toBe(1);
    expect(verbose.stderr).toContain('ECONNREFUSED');
    expect(verbose.stderr).toMatch(/^pg-queue: Error: connect ECONNREFUSED 127.0.0.1:1\n\s+at /m); // the stack
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

    // Destructive: in a script (stdin not a terminal) it says what it would drop and refuses without --yes.
    const refused = await cli('migrate', 'down');
    expect(refused).toEqual({
      code: 2,
      stdout: '',
      stderr: `pg-queue: undo the queue migration ${names.at(-1)}: ${LAST_DOWN}: not confirmed (stdin is not a terminal, so no question can be asked); pass --yes to go ahead\n`,
    });
    expect((await sql.query(`SELECT count(*)::int AS n FROM migrations`)).rows[0].n).toBe(names.length);
    const down = await cli('migrate', 'down', '--yes');
    expect(down.code).toBe(0);
    expect(down.stdout).toBe(`reverted ${names.at(-1)}\n`);
    expect((await sql.query(`SELECT name FROM migrations ORDER BY id`)).rows.map((r) => r.name)).toEqual(names.slice(0, -1));
    // The last migration (KeyPriorities) is undone: its index is gone, the keyed claim index kept.
    expect((await sql.query(`SELECT to_regclass('background_jobs_key_priority_idx') AS dropped, to_regclass('background_jobs_key_claim_idx') IS NOT NULL AS kept`)).rows).toEqual([{ dropped: null, kept: true }]);

    const status = await cli('migrate', 'status');
    expect(status.stdout).toContain(`${names.at(-1)}`);
    expect(status.stdout).toMatch(new RegExp(`${names.at(-1)}\\s+pending`));
    expect(status.stdout).toContain('1 pending: run `pg-queue migrate`');

    expect((await cli('migrate')).stdout).toBe(`applied 1 migration(s): ${names.at(-1)}\n`);
  });

  it('starts without loading Nest or TypeORM: a command pays for its own work (under load, about 0.4 s of CPU less per call)', async () => {
    // Every command module is imported at start (main.ts); `migrate` and `events` load what needs Nest or TypeORM when
    // they run (a dynamic import). The built files the CLI's static imports reach, from dist/cli/main.js: none of them
    // imports either package (terminalText once sat beside the library's Nest logger, and @nestjs/common took 60 % of
    // every command's start).
    const reached = new Set<string>();
    const heavy: string[] = [];
    const walk = async (file: string): Promise<void> => {
      if (reached.has(file)) return;
      reached.add(file);
      const text = await readFile(file, 'utf8');
      for (const [, from] of text.matchAll(/^(?:import|export)\s[^;]*?\sfrom\s+'([^']+)';|^import\s+'([^']+)';/gm)) {
        if (from === undefined) continue;
        if (from.startsWith('.')) await walk(join(file, '..', from));
        else if (/^(@nestjs\/|typeorm($|\/))/.test(from)) heavy.push(`${file.slice(file.indexOf('/dist/') + 1)} imports ${from}`);
      }
    };
    await walk(fileURLToPath(new URL('../dist/cli/main.js', import.meta.url)));
    expect(reached.size).toBeGreaterThan(30);
    expect(heavy).toEqual([]);
  });

  it('a URL that is not one exits 2 naming the option; --version prints the version; jobs retry of a missing id exits 1', async () => {
    expect(await runCli(['--url', 'not a url', 'stats'])).toEqual({ code: 2, stdout: '', stderr: 'pg-queue: --url is not a postgres:// URL\n' });
    expect(await runCli(['stats'], { DATABASE_URL: 'mysql://u:secret@db/x' })).toEqual({ code: 2, stdout: '', stderr: 'pg-queue: DATABASE_URL is not a postgres:// URL\n' });
    const { version } = JSON.parse(await readFile(fileURLToPath(new URL('../package.json', import.meta.url)), 'utf8')) as { version: string };
    expect(await runCli(['--version'])).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
    expect(await cli('jobs', 'retry', '999999999', '--yes')).toEqual({ code: 1, stdout: '', stderr: 'pg-queue: job 999999999 not found: nothing changed\n' });
    // A retry of a completed job is refused with the reason (it exited 0 having changed nothing); the row is as it was.
    const { rows } = await sql.query<{ id: string }>(`INSERT INTO background_jobs (queue_name, payload, status, attempts, finished_at) VALUES ('done-q', '{}', 'completed', 1, now()) RETURNING id::text AS id`);
    expect(await cli('jobs', 'retry', rows[0].id, '--yes')).toEqual({ code: 1, stdout: '', stderr: `pg-queue: job ${rows[0].id} is not failed or cancelled, the only statuses retry changes: nothing changed\n` });
    expect((await sql.query<{ status: string }>('SELECT status::text AS status FROM background_jobs WHERE id = $1', [rows[0].id])).rows[0].status).toBe('completed');
    await sql.query('DELETE FROM background_jobs WHERE id = $1', [rows[0].id]);
  });

  // Anyone on the machine reads a command line while it runs (ps, /proc/<pid>/cmdline): a password given with --url
  // is warned about at every run, naming the ways that keep it off the command line (issue 18 item 9).
  it('a password in --url: a warning on stderr naming DATABASE_URL, PGPASSWORD and ~/.pgpass; none from DATABASE_URL or a URL without one', async () => {
    const withPassword = new URL(url);
    expect(withPassword.password).not.toBe('');
    const warned = await runCli(['--url', url, 'pause', 'warned']);
    expect(warned).toEqual({ code: 0, stdout: 'paused warned\n', stderr: `pg-queue: ${PASSWORD_IN_URL()}\n` });
    expect(warned.stderr).toMatch(/DATABASE_URL.*PGPASSWORD.*~\/\.pgpass/);
    expect(warned.stderr).not.toContain(decodeURIComponent(withPassword.password));
    expect(await runCli(['resume', 'warned'], { DATABASE_URL: url })).toEqual({ code: 0, stdout: 'resumed warned\n', stderr: '' });
    // The password from PGPASSWORD, the URL without it: no warning.
    const bare = new URL(url);
    bare.password = '';
    expect(await runCli(['--url', bare.toString(), 'resume', 'warned'], { PGPASSWORD: decodeURIComponent(withPassword.password) })).toEqual({ code: 0, stdout: 'resumed warned\n', stderr: '' });
    await sql.query(`DELETE FROM background_queues WHERE queue_name = 'warned'`);
  });

  // A server that accepts the connection and never answers: the message named the module's poolSize and
  // connectTimeoutMs, which the command does not have (issue 18 item 9).
  it('a database that never answers: the error names --connect-timeout, not module options; doctor says it once', async () => {
    const silent = net.createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as net.AddressInfo).port;
    const env = { DATABASE_URL: `postgres://someone@127.0.0.1:${port}/db` };
    try {
      const expected = `pg-queue: ${CONNECT_TIMEOUT('1s')}\n`;
      for (const args of [['stats'], ['pause', 'q'], ['jobs', 'list'], ['migrate', 'status'], ['schedules', 'list']]) {
        const result = await runCli(['--connect-timeout', '1s', ...args], env);
        expect({ args, ...result }).toEqual({ args, code: 1, stdout: '', stderr: expected });
      }
      const doctor = await runCli(['--connect-timeout', '1s', 'doctor', '--json'], env);
      expect(doctor.code).toBe(1);
      expect(JSON.parse(doctor.stdout)).toEqual([{ check: 'connection', state: 'fail', detail: CONNECT_TIMEOUT('1s'), hint: expect.any(String) }]);
      expect(doctor.stderr).toBe(`pg-queue: ${CANNOT_CONNECT()}\n`);
      expect((await runCli(['--connect-timeout', 'soon', 'stats'], env)).code).toBe(2);
    } finally {
      silent.close();
    }
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
      'queue queued blocked processing completed failed cancelled paused',
      expect.stringMatching(/^-+ -+ -+ -+ -+ -+ -+ -+$/),
      'mail 2 0 0 1 1 0',
      'sms 1 0 0 0 0 0 yes',
      '',
    ]);
    const json = await cli('stats', '--json');
    expect(JSON.parse(json.stdout)).toEqual({
      queues: { mail: { queued: 2, blocked: 0, processing: 0, completed: 1, failed: 1, cancelled: 0 }, sms: { queued: 1, blocked: 0, processing: 0, completed: 0, failed: 0, cancelled: 0 } },
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
    // Newest first by default (the dashboard's order, job-list-order.ts), oldest first with --oldest-first: the same jobs.
    const listed = async (args: string[], oldestFirst: string[]) => {
      expect(await ids(...args)).toEqual([...oldestFirst].reverse());
      expect(await ids(...args, '--oldest-first')).toEqual(oldestFirst);
    };
    const filtered: [string[], string[]][] = [
      [[], [a, b, c, d]],
      [['--queue', 'mail'], [a, b, c]],
      [['--status', 'failed'], [a, b, d]],
      [['--status', 'failed', '--status', 'queued', '--queue', 'mail'], [a, b, c]],
      [['--older-than', '1h'], [a, c, d]],
      [['--error', 'smtp timeout'], [a, d]],
      [['--error', 'smtp timeout', '--queue', 'mail', '--older-than', '90m'], [a]],
    ];
    for (const [args, oldestFirst] of filtered) await listed(args, oldestFirst);
    // Queued jobs as due (run_at come) or scheduled (run_at ahead), as the dashboard shows them apart.
    const { rows: later } = await sql.query<{ id: string }>(`INSERT INTO background_jobs (queue_name, payload, run_at) VALUES ('mail', '{"to":"e"}', now() + interval '1 hour') RETURNING id`);
    expect(await ids('--due')).toEqual([c]);
    expect(await ids('--scheduled')).toEqual([later[0].id]);
    expect(await ids('--scheduled', '--status', 'queued', '--queue', 'sms')).toEqual([]);
    expect((await cli('jobs', 'list', '--due', '--scheduled')).stderr).toContain('--due and --scheduled exclude each other');
    expect((await cli('jobs', 'list', '--due', '--status', 'failed')).stderr).toContain('--due lists queued jobs only');
    const dryRun = await cli('jobs', 'cancel', '--scheduled', '--dry-run');
    expect([dryRun.code, dryRun.stdout.trim()]).toEqual([0, 'dry run: would cancel 1 job(s) in status queued, whose run_at is still ahead; nothing changed']);
    expect((await cli('jobs', 'retry', '--scheduled')).stderr).toContain('queued');
    await sql.query('DELETE FROM background_jobs WHERE id = $1', [later[0].id]);
    // Keyset pages: --limit, then --after the last id.
    expect(await ids('--limit', '2')).toEqual([d, c]);
    expect(await ids('--limit', '2', '--after', c)).toEqual([b, a]);
    expect(await ids('--after', a)).toEqual([]);
    expect(await ids('--limit', '2', '--oldest-first')).toEqual([a, b]);
    expect(await ids('--limit', '2', '--after', b, '--oldest-first')).toEqual([c, d]);
    expect(await ids('--after', d, '--oldest-first')).toEqual([]);

    const table = await cli('jobs', 'list', '--limit', '2', '--oldest-first');
    expect(table.stdout).toMatch(/^id\s+queue\s+status\s+attempts\s+priority\s+run at\s+created at\s+last error\n/);
    expect(table.stdout).toContain('SMTP timeout\n'); // the first line of the error only
    expect(table.stdout).toContain(`next page: --after ${b} --oldest-first\n`);
    expect((await cli('jobs', 'list', '--limit', '2')).stdout).toContain(`next page: --after ${c}\n`);

    const show = await cli('jobs', 'show', a);
    expect(show.code).toBe(0);
    expect(show.stdout).toMatch(new RegExp(`^id\\s+${a}\\n`));
    expect(show.stdout).toContain('status          failed\n');
    expect(show.stdout).toContain('payload\n{\n  "to": "a"\n}\nlast error\nSMTP timeout\n  at send()\n');
    expect(JSON.parse((await cli('jobs', 'show', b, '--json')).stdout)).toMatchObject({ id: b, queue: 'mail', status: 'failed', payload: { to: 'b' }, lastError: 'mailbox full' });

    // Durable steps: each on its line (a sleep with its end); result and progress objects as JSON, not [object Object].
    await sql.query(
      `UPDATE background_jobs SET progress = '{"done": 2}', steps = '[{"name":"charge","result":{"id":"ch_1"},"attempt":1,"at":"2026-12-02T10:00:00.000Z"},{"name":"nap","attempt":1,"at":"2026-12-02T10:00:01.000Z","until":"2026-12-02T11:00:01.000Z"}]' WHERE id = $1`,
      [a],
    );
    const stepped = await cli('jobs', 'show', a);
    expect(stepped.stdout).toContain('progress        {"done":2}\n');
    expect(stepped.stdout).toContain('\n  charge  attempt 1  2026-12-02T10:00:00.000Z  {"id":"ch_1"}\n  nap  attempt 1  2026-12-02T10:00:01.000Z  sleep until 2026-12-02T11:00:01.000Z\n');

    // The attempt history (README: "Attempt history"): each attempt that did not complete, oldest first, its whole
    // error indented under it; in --json as `history`.
    await sql.query(
      `INSERT INTO background_job_attempts (job_id, attempt, worker, started_at, finished_at, outcome, error)
       VALUES ($1, 1, 'w-1', '2026-12-02T10:00:00Z', '2026-12-02T10:00:00.250Z', 'failed', 'Error: upstream timed out
    at call()'),
              ($1, 2, 'w-2', '2026-12-02T10:01:00Z', '2026-12-02T10:01:30Z', 'lease-expired', 'lease expired')`,
      [a],
    );
    const attempted = await cli('jobs', 'show', a);
    expect(attempted.stdout).toContain(
      'attempt history (attempts that did not complete, oldest first, each with its whole error)\n' +
        '  1  failed  w-1  2026-12-02T10:00:00.000Z  250 ms\n' +
        '      Error: upstream timed out\n' +
        '          at call()\n' +
        '  2  lease-expired  w-2  2026-12-02T10:01:00.000Z  30000 ms\n' +
        '      lease expired\n',
    );
    expect(JSON.parse((await cli('jobs', 'show', a, '--json')).stdout).history).toMatchObject([
      { attempt: 1, worker: 'w-1', outcome: 'failed', durationMs: 250, error: 'Error: upstream timed out\n    at call()' },
      { attempt: 2, worker: 'w-2', outcome: 'lease-expired', durationMs: 30_000 },
    ]);

    const missing = await cli('jobs', 'show', '999999');
    expect(missing).toEqual({ code: 1, stdout: '', stderr: 'pg-queue: job 999999 not found\n' });
    expect((await cli('jobs', 'show', 'abc')).code).toBe(2);
  });

  describe('jobs retry | cancel | delete', () => {
    const seedFailed = async (n: number, queue = 'bulk') => {
      await sql.query(`DELETE FROM background_jobs`);
      await sql.query(
        `INSERT INTO background_jobs (queue_name, payload, status, attempts, last_error, finished_at)
         SELECT $1, jsonb_build_object('n', g), 'failed', 5, 'gateway timeout', now() FROM generate_series(1, $2::int) AS g`,
        [queue, n],
      );
    };
    const byStatus = async () =>
      Object.fromEntries((await sql.query<{ status: string; n: number }>(`SELECT status, count(*)::int AS n FROM background_jobs GROUP BY status`)).rows.map((r) => [r.status, r.n]));

    it('--dry-run counts and changes nothing; without --yes and with stdin not a terminal it refuses (exit 2), nothing changed', async () => {
      await seedFailed(25);
      const dry = await cli('jobs', 'retry', '--queue', 'bulk', '--dry-run');
      expect(dry).toEqual({ code: 0, stdout: 'dry run: would retry 25 job(s) of queue bulk, in status failed or cancelled; nothing changed\n', stderr: '' });
      const refused = await cli('jobs', 'retry', '--queue', 'bulk', '--older-than', '0s');
      expect(refused.code).toBe(2);
      expect(refused.stderr).toBe(
        'pg-queue: retry 25 job(s) of queue bulk, in status failed or cancelled, created over 0ms ago: not confirmed (stdin is not a terminal, so no question can be asked); pass --yes to go ahead, or --dry-run to only count\n',
      );
      expect(await byStatus()).toEqual({ failed: 25 });
      // Bad usage: nothing to aim at, ids and filters together, a status the action cannot change.
      expect((await cli('jobs', 'retry', '--yes')).stderr).toContain('jobs retry needs job ids or at least one filter');
      expect((await cli('jobs', 'retry', '1', '--queue', 'bulk', '--yes')).code).toBe(2);
      expect((await cli('jobs', 'retry', '--status', 'queued', '--yes')).stderr).toContain('jobs retry applies to failed or cancelled jobs; --status queued');
      expect((await cli('jobs', 'delete', '--status', 'processing', '--yes')).code).toBe(2);
      expect(await byStatus()).toEqual({ failed: 25 });
    });

    it('retries 3,000 failed jobs in batches of 1,000 rows (one transaction each), attempts reset, other queues untouched', async () => {
      await seedFailed(3_000);
      await sql.query(`INSERT INTO background_jobs (queue_name, payload, status, attempts, last_error, finished_at) VALUES ('other', '{}', 'failed', 5, 'x', now())`);
      const result = await cli('jobs', 'retry', '--queue', 'bulk', '--status', 'failed', '--yes');
      expect(result).toEqual({ code: 0, stdout: 'retried 3,000 job(s)\n', stderr: '' });
      const { rows } = await sql.query<{ status: string; attempts: number; finished: boolean; n: number; txs: number }>(
        `SELECT status, attempts, finished_at IS NOT NULL AS finished, count(*)::int AS n, count(DISTINCT xmin::text)::int AS txs
         FROM background_jobs WHERE queue_name = 'bulk' GROUP BY 1, 2, 3`,
      );
      // Rows written by one transaction share its xmin: three batches of 1,000.
      expect(rows).toEqual([{ status: 'queued', attempts: 0, finished: false, n: 3_000, txs: 3 }]);
      const perTx = await sql.query(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'bulk' GROUP BY xmin::text`);
      expect(perTx.rows.map((r) => r.n)).toEqual([1_000, 1_000, 1_000]);
      expect((await sql.query(`SELECT status FROM background_jobs WHERE queue_name = 'other'`)).rows).toEqual([{ status: 'failed' }]);
    });

    // On a terminal (util-linux `script` gives the command a pseudo-terminal): the question, then the progress bar.
    (spawnSync('script', ['--version']).status === 0 ? it : it.skip)('on a terminal it asks; y goes ahead with a progress bar, anything else changes nothing (exit 1)', async () => {
      await seedFailed(2_500);
      const onTerminal = (args: string, answer: string) => runCliOnTerminal(args, answer, url);
      const declined = await onTerminal('jobs retry --queue bulk', 'n');
      expect(declined.output).toContain('Retry 2,500 job(s) of queue bulk, in status failed or cancelled? [y/N]');
      expect(declined.output).toContain('pg-queue: not confirmed: nothing changed');
      expect(declined.code).toBe(1);
      expect(await byStatus()).toEqual({ failed: 2_500 });

      const accepted = await onTerminal('jobs retry --queue bulk', 'y');
      expect(accepted.code).toBe(0);
      expect(accepted.output).toMatch(/retry \[[█░]+\] 2500\/2500 jobs/);
      expect(accepted.output).toContain('retried 2,500 job(s)');
      expect(await byStatus()).toEqual({ queued: 2_500 });
    });

    it('retry skips a job whose unique key another live job holds (and all but one of several failed jobs sharing a key)', async () => {
      await sql.query(`DELETE FROM background_jobs`);
      await sql.query(`
        INSERT INTO background_jobs (queue_name, payload, status, finished_at, unique_key) VALUES
          ('u', '{}', 'failed', now(), 'k1'), ('u', '{}', 'queued', NULL, 'k1'),
          ('u', '{}', 'failed', now(), 'k2'), ('u', '{}', 'failed', now(), 'k2'),
          ('u', '{}', 'failed', now(), NULL)`);
      const result = await cli('jobs', 'retry', '--queue', 'u', '--yes', '--batch-size', '2');
      expect(result).toEqual({ code: 0, stdout: 'retried 2 job(s); 2 skipped (another job holds its unique key)\n', stderr: '' });
      const { rows } = await sql.query(`SELECT unique_key, status::text, count(*)::int AS n FROM background_jobs GROUP BY 1, 2 ORDER BY 1, 2`);
      expect(rows).toEqual([
        { unique_key: 'k1', status: 'failed', n: 1 },
        { unique_key: 'k1', status: 'queued', n: 1 },
        { unique_key: 'k2', status: 'failed', n: 1 },
        { unique_key: 'k2', status: 'queued', n: 1 },
        { unique_key: null, status: 'queued', n: 1 },
      ]);
    });

    it('cancel by id and by filter (running jobs get the NOTIFY that aborts them); delete by filter; retry by id', async () => {
      await sql.query(`DELETE FROM background_jobs`);
      const { rows } = await sql.query<{ id: string }>(`
        INSERT INTO background_jobs (queue_name, payload, status, locked_by, lease_expires_at, finished_at) VALUES
          ('c', '{}', 'queued', NULL, NULL, NULL), ('c', '{}', 'processing', 'w1', now() + interval '1 minute', NULL),
          ('c', '{}', 'completed', NULL, NULL, now()), ('d', '{}', 'queued', NULL, NULL, NULL)
        RETURNING id`);
      const [queued, running, completed, other] = rows.map((r) => r.id);
      const listener = await sql.connect();
      const heard: string[] = [];
      try {
        listener.on('notification', (n) => heard.push(`${n.channel} ${n.payload}`));
        await listener.query('LISTEN pg_queue_cancel');
        expect((await cli('jobs', 'cancel', queued, completed, '--yes')).stdout).toBe('cancelled 1 job(s)\n'); // a completed job is left alone
        expect((await cli('jobs', 'cancel', '--queue', 'c', '--yes')).stdout).toBe('cancelled 1 job(s)\n');
        await sql.query('SELECT 1');
        for (let i = 0; i < 50 && heard.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
        expect(heard).toEqual([`pg_queue_cancel ${running}:0`]);
      } finally {
        listener.release(true);
      }
      const status = async () => Object.fromEntries((await sql.query(`SELECT id::text, status::text FROM background_jobs`)).rows.map((r) => [r.id, r.status]));
      expect(await status()).toEqual({ [queued]: 'cancelled', [running]: 'cancelled', [completed]: 'completed', [other]: 'queued' });

      expect((await cli('jobs', 'retry', queued, '--yes')).stdout).toBe('retried 1 job(s)\n');
      expect((await cli('jobs', 'delete', '--queue', 'c', '--status', 'cancelled', '--status', 'completed', '--yes')).stdout).toBe('deleted 2 job(s)\n');
      expect(await status()).toEqual({ [queued]: 'queued', [other]: 'queued' });
      expect((await cli('jobs', 'delete', '--all', '--dry-run')).stdout).toBe('dry run: would delete 2 job(s) in status queued or completed or failed or cancelled; nothing changed\n');
    });
  });

  it('enqueue: through pg_queue_enqueue, whose checks refuse a job (exit 2, nothing stored) as do the payload\'s (bad JSON, what jsonb cannot store, the size); options, unique keys', async () => {
    await sql.query(`DELETE FROM background_jobs`);
    const plain = await cli('enqueue', 'mail', '{"to":"a@example.com"}', '--priority', '3', '--delay', '1h', '--max-attempts', '2');
    expect(plain.code).toBe(0);
    const id = /^enqueued job (\d+)\n$/.exec(plain.stdout)![1];
    const { rows } = await sql.query(`SELECT queue_name, payload, priority, max_attempts, round(extract(epoch FROM run_at - now()) / 60)::int AS minutes FROM background_jobs WHERE id = $1`, [id]);
    expect(rows).toEqual([{ queue_name: 'mail', payload: { to: 'a@example.com' }, priority: 3, max_attempts: 2, minutes: 60 }]);

    expect(await cli('enqueue', 'mail', '{"to":1}', '--unique-key', 'k')).toMatchObject({ code: 0, stdout: expect.stringMatching(/^enqueued job \d+\n$/) });
    const dup = await cli('enqueue', 'mail', '{"to":2}', '--unique-key', 'k', '--on-conflict', 'replace');
    expect(dup.stdout).toMatch(/^duplicate: job \d+ holds the key \(its payload replaced\)\n$/);
    expect((await sql.query(`SELECT payload FROM background_jobs WHERE unique_key = 'k'`)).rows).toEqual([{ payload: { to: 2 } }]);
    const keyed = await cli('enqueue', 'mail', '{"to":3}', '--concurrency-key', 'tenant-7', '--run-at', '2030-01-02T03:04:05Z');
    const keyedId = /^enqueued job (\d+)\n$/.exec(keyed.stdout)![1];
    expect((await sql.query(`SELECT concurrency_key, run_at FROM background_jobs WHERE id = $1`, [keyedId])).rows).toEqual([
      { concurrency_key: 'tenant-7', run_at: new Date('2030-01-02T03:04:05Z') },
    ]);
    // --lifo, plain and keyed: the job says so, and so does its queue's row (its workers then take LIFO jobs first).
    const lifo = /^enqueued job (\d+)\n$/.exec((await cli('enqueue', 'stack', '{}', '--lifo')).stdout)![1];
    const lifoKeyed = /^enqueued job (\d+)\n$/.exec((await cli('enqueue', 'stack', '{}', '--lifo', '--unique-key', 'l')).stdout)![1];
    expect((await sql.query(`SELECT id::text, lifo FROM background_jobs WHERE queue_name = 'stack' ORDER BY id`)).rows).toEqual([
      { id: lifo, lifo: true },
      { id: lifoKeyed, lifo: true },
    ]);
    expect((await sql.query(`SELECT lifo_jobs FROM background_queues WHERE queue_name = 'stack'`)).rows).toEqual([{ lifo_jobs: true }]);
    await sql.query(`DELETE FROM background_queues WHERE queue_name = 'stack'`); // the pause test reads the table whole
    expect((await sql.query(`SELECT lifo FROM background_jobs WHERE id = $1`, [id])).rows).toEqual([{ lifo: null }]);

    for (const [args, message] of [
      [['mail', '{oops'], 'pg-queue: the payload is not JSON: '],
      [['no spaces', '{}'], 'pg-queue: Invalid queue name "no spaces"'],
      [['mail', '"\\u0000"'], 'NUL character'],
      [['mail', '{"a":1}', '--max-payload-bytes', '4'], 'pg-queue: Cannot enqueue to "mail"'],
      [['mail', '{}', '--on-conflict', 'sometimes', '--unique-key', 'z'], `pg-queue: Invalid pg_queue_enqueue_unique("mail") option on_conflict="sometimes": expected one of 'keep', 'replace', 'keep-run-at', 'queue-after'.`],
      [['mail', '{}', '--on-conflict', 'replace'], 'pg-queue: Invalid pg_queue_enqueue_unique("mail") option on_conflict="replace": expected no on_conflict without a unique_key.'],
      [['mail', '{}', '--delay', '1m', '--run-at', '2030-01-01T00:00:00Z'], 'pg-queue: Invalid pg_queue_enqueue("mail") option delay_ms=60000: expected no delay_ms with run_at (give one of them).'],
      [['mail', '{}', '--concurrency-key', ''], 'pg-queue: Invalid pg_queue_enqueue("mail") option concurrency_key="": expected a non-empty string of at most 512 characters.'],
    ] as const) {
      const result = await cli('enqueue', ...args);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain(message);
    }
    expect((await sql.query(`SELECT count(*)::int AS n FROM background_jobs`)).rows[0].n).toBe(5);
  });

  it('limits: shows and changes a queue\'s limits at runtime; bad values exit 2 and store nothing', async () => {
    const set = await cli('limits', 'api', '--global', '2', '--rate', '20/1000', '--per-key', 'none');
    expect(set).toEqual({
      code: 0,
      stdout: "queue api\nconcurrency        the decorator's\nglobalConcurrency  2 (set here)\nrateLimit          20/1000 ms (set here)\nconcurrencyPerKey  none (set here)\n",
      stderr: '',
    });
    expect((await sql.query(`SELECT limits FROM background_queues WHERE queue_name = 'api'`)).rows).toEqual([
      { limits: { globalConcurrency: 2, rateLimit: { max: 20, intervalMs: 1_000 }, concurrencyPerKey: null } },
    ]);
    const bad = await cli('limits', 'api', '--global', '0');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('globalConcurrency must be an integer from 1 to 1000000');
    expect((await cli('limits', 'api', '--rate', 'fast')).code).toBe(2);
    expect((await cli('limits', 'api', '--concurrency', 'none')).code).toBe(2);
    expect((await sql.query(`SELECT limits->'globalConcurrency' AS g FROM background_queues WHERE queue_name = 'api'`)).rows).toEqual([{ g: 2 }]);
    const json = await cli('limits', 'api', '--json');
    expect(JSON.parse(json.stdout)).toMatchObject({ queue: 'api', globalConcurrency: { value: 2, source: 'database' }, concurrency: { source: 'decorator' } });
    expect((await cli('limits', 'api', '--reset')).code).toBe(0);
    expect((await sql.query(`SELECT limits FROM background_queues WHERE queue_name = 'api'`)).rows).toEqual([{ limits: null }]);
    await sql.query(`DELETE FROM background_queues WHERE queue_name = 'api'`);
  });

  it('pause and resume a queue; prune runs one pass of the pruner', async () => {
    expect(await cli('pause', 'mail')).toEqual({ code: 0, stdout: 'paused mail\n', stderr: '' });
    expect((await sql.query(`SELECT queue_name, paused FROM background_queues`)).rows).toEqual([{ queue_name: 'mail', paused: true }]);
    expect(await cli('resume', 'mail')).toEqual({ code: 0, stdout: 'resumed mail\n', stderr: '' });
    expect((await sql.query(`SELECT paused FROM background_queues WHERE queue_name = 'mail'`)).rows).toEqual([{ paused: false }]);

    await sql.query(`DELETE FROM background_jobs`);
    await sql.query(`
      INSERT INTO background_jobs (queue_name, payload, status, finished_at) VALUES
        ('p', '{}', 'completed', now() - interval '2 days'), ('p', '{}', 'completed', now() - interval '1 hour'),
        ('p', '{}', 'failed', now() - interval '8 days'), ('p', '{}', 'cancelled', now() - interval '2 days'), ('p', '{}', 'queued', NULL)`);
    // Destructive: in a script it says what it would delete and refuses without --yes; --dry-run only counts.
    const what = 'delete 1 completed job(s) finished over 1d ago and 1 failed/cancelled job(s) finished over 1w ago';
    expect(await cli('prune')).toEqual({ code: 2, stdout: '', stderr: `pg-queue: ${what}: not confirmed (stdin is not a terminal, so no question can be asked); pass --yes to go ahead, or --dry-run to only count\n` });
    expect(await cli('prune', '--dry-run')).toEqual({ code: 0, stdout: `would ${what} (dry run: nothing deleted)\n`, stderr: '' });
    expect((await sql.query(`SELECT count(*)::int AS n FROM background_jobs`)).rows[0].n).toBe(5);
    expect((await cli('prune', '--yes')).stdout).toBe('deleted 1 completed and 1 failed/cancelled job(s) past retention\n'); // the module's defaults: 1d, 7d
    expect((await cli('prune', '--yes', '--completed-retention', '30m', '--failed-retention', 'never')).stdout).toBe('deleted 1 completed and 0 failed/cancelled job(s) past retention\n');
    expect((await cli('prune', '-y', '--failed-retention', '1d', '--batch-size', '1')).stdout).toBe('deleted 0 completed and 1 failed/cancelled job(s) past retention\n');
    expect((await sql.query(`SELECT status::text FROM background_jobs`)).rows).toEqual([{ status: 'queued' }]);
  });

  // Recurring schedules from the command line (issue 18 item 9): through QueueService's schedule methods and the
  // scheduler's fireNow, so a change is what an app's call makes, and running instances see it at their next tick.
  it('schedules: list, pause, resume, fire (the job a tick would enqueue), remove (asks; --yes in a script); a missing name exits 1, a bad one 2', async () => {
    await sql.query(`DELETE FROM background_schedules`);
    await sql.query(`DELETE FROM background_jobs`);
    await sql.query(`
      INSERT INTO background_schedules (name, queue_name, cron, time_zone, payload, priority, max_attempts, next_fire_at, source, declared_at) VALUES
        ('nightly-report', 'reports', '0 3 * * *', 'Europe/Berlin', '{"kind": "nightly"}', 2, 3, date_trunc('second', now()) + interval '1 hour', 'runtime', NULL),
        ('cleanup', 'maintenance', '*/5 * * * *', 'UTC', '{}', 0, NULL, date_trunc('second', now()) + interval '5 minutes', 'code', now()),
        ('old-sync', 'sync', '0 * * * *', 'UTC', '{}', 0, NULL, date_trunc('second', now()) + interval '1 hour', 'code', now() - interval '1 hour')`);
    const schedule = async (name: string) =>
      (await sql.query(`SELECT paused, revision::int, next_fire_at, (next_fire_at > now()) AS ahead FROM background_schedules WHERE name = $1`, [name])).rows[0];
    const before = await schedule('nightly-report');

    const list = await cli('schedules', 'list');
    expect(list.code).toBe(0);
    const lines = list.stdout.trimEnd().split('\n');
    expect(lines[0].split(/\s{2,}/)).toEqual(['name', 'queue', 'when', 'time zone', 'next fire', 'last fire', 'fires', 'start', 'end', 'state', 'source']);
    expect(lines.slice(2).map((l) => l.split(/\s+/)[0] + ' ' + l.trim().split(/\s+/).slice(-2).join(' '))).toEqual([
      'cleanup active code',
      'nightly-report active runtime',
      'old-sync orphaned code',
    ]);
    const json = JSON.parse((await cli('schedules', 'list', '--json')).stdout) as { name: string; orphaned: boolean; nextFireAt: string; payload: unknown }[];
    expect(json.map((s) => [s.name, s.orphaned])).toEqual([['cleanup', false], ['nightly-report', false], ['old-sync', true]]);
    expect(json[1]).toMatchObject({ queue: 'reports', cron: '0 3 * * *', timeZone: 'Europe/Berlin', payload: { kind: 'nightly' }, priority: 2, maxAttempts: 3, paused: false, source: 'runtime', lastFireAt: null });
    // The module's orphanAfterMs, when the app changed it: declared 1 h ago is live under a 2 h limit.
    const longer = JSON.parse((await cli('schedules', 'list', '--json', '--orphan-after', '2h')).stdout) as { name: string; orphaned: boolean }[];
    expect(longer.find((s) => s.name === 'old-sync')?.orphaned).toBe(false);

    expect(await cli('schedules', 'pause', 'nightly-report')).toEqual({ code: 0, stdout: 'paused schedule nightly-report\n', stderr: '' });
    expect(await schedule('nightly-report')).toMatchObject({ paused: true, revision: before.revision + 1 });
    expect((await cli('schedules', 'pause', 'nightly-report')).stdout).toBe('schedule nightly-report is already paused\n');
    expect((await cli('schedules', 'list')).stdout).toMatch(/^nightly-report .* paused\s+runtime$/m);

    const resumed = await cli('schedules', 'resume', 'nightly-report');
    expect(resumed.code).toBe(0);
    const after = await schedule('nightly-report');
    expect(after).toMatchObject({ paused: false, revision: before.revision + 2, ahead: true });
    expect(resumed.stdout).toBe(`resumed schedule nightly-report: next fire ${after.next_fire_at.toISOString()}\n`);
    // From the next fire after now: 03:00 in Berlin, within a day.
    expect(new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/Berlin', hour: '2-digit', minute: '2-digit' }).format(after.next_fire_at)).toBe('03:00');
    expect((await cli('schedules', 'resume', 'nightly-report')).stdout).toBe('schedule nightly-report is not paused\n');

    const fired = await cli('schedules', 'fire', 'nightly-report');
    expect(fired.code).toBe(0);
    const jobId = /^enqueued job (\d+) to queue reports \(a fire of schedule nightly-report\)\n$/.exec(fired.stdout)![1];
    const { rows: jobs } = await sql.query(`SELECT id::text, queue_name, payload, priority, max_attempts, status::text, run_at <= now() AS due FROM background_jobs`);
    expect(jobs).toEqual([
      {
        id: jobId,
        queue_name: 'reports',
        payload: { kind: 'nightly', _schedule: { name: 'nightly-report', fireAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) } },
        priority: 2,
        max_attempts: 3,
        status: 'queued',
        due: true,
      },
    ]);
    expect((await schedule('nightly-report')).next_fire_at).toEqual(after.next_fire_at); // the schedule did not move

    // Removing asks first; in a script it needs --yes.
    expect(await cli('schedules', 'remove', 'nightly-report')).toEqual({
      code: 2,
      stdout: '',
      stderr: `pg-queue: remove the schedule nightly-report (queue reports, cron "0 3 * * *"): not confirmed (stdin is not a terminal, so no question can be asked); pass --yes to go ahead\n`,
    });
    expect(await cli('schedules', 'remove', 'nightly-report', '--yes')).toEqual({ code: 0, stdout: 'removed schedule nightly-report\n', stderr: '' });
    expect((await cli('schedules', 'remove', 'cleanup', '-y')).stdout).toContain('declared in code: an instance that declares it makes it again at its next boot');
    expect((await sql.query(`SELECT name FROM background_schedules`)).rows).toEqual([{ name: 'old-sync' }]);
    expect((await sql.query(`SELECT count(*)::int AS n FROM background_jobs`)).rows[0].n).toBe(1); // its job stays

    // Every action looks the schedule up first, through the service's own name check.
    expect(await cli('schedules', 'fire', 'nightly-report')).toEqual({ code: 1, stdout: '', stderr: 'pg-queue: schedule "nightly-report" not found\n' });
    const bad = await cli('schedules', 'pause', 'no spaces!');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('Invalid schedule name "no spaces!"');
    expect((await cli('schedules', 'list', '--orphan-after', '1s')).code).toBe(2);
  }, 120_000);

  // Issue 43: every, limit, startDate / endDate and the payload template from the command line: `schedules set` is
  // QueueService.upsertSchedule (its checks, its messages), and the list shows what the schedule holds.
  it('schedules set: a cron or an interval with a limit, dates and a payload template; list shows when, fires of the limit, start, end and ended; bad input exits 2', async () => {
    await sql.query(`DELETE FROM background_schedules`);
    await sql.query(`DELETE FROM background_jobs`);
    const set = await cli('schedules', 'set', 'pulse', '--queue', 'pulses', '--every', '90s', '--limit', '3', '--start', '2099-01-01T00:00:00Z', '--end', '2099-01-02T00:00:00Z', '--payload', '{"day":"{{fireDate}}","who":"{{name}}"}', '--time-zone', 'Europe/Paris');
    expect(set).toEqual({ code: 0, stdout: 'set schedule pulse: every 90s into queue pulses; next fire 2099-01-01T00:00:00.000Z; 3 of 3 fire(s) left\n', stderr: '' });
    const nightly = await cli('schedules', 'set', 'nightly', '--queue', 'reports', '--cron', '0 3 * * *', '--missed-fires', '2h', '--priority', '4', '--max-attempts', '2');
    expect(nightly.code).toBe(0);
    expect(nightly.stdout).toMatch(/^set schedule nightly: 0 3 \* \* \* into queue reports; next fire \d{4}-\d\d-\d\dT03:00:00\.000Z\n$/);
    const { rows } = await sql.query(`SELECT name, cron, every_ms::int, fire_limit::int, fires::int, start_at, end_at, time_zone, payload, missed_fires, missed_window_ms::int, priority, max_attempts FROM background_schedules ORDER BY name`);
    expect(rows).toEqual([
      { name: 'nightly', cron: '0 3 * * *', every_ms: null, fire_limit: null, fires: 0, start_at: null, end_at: null, time_zone: 'UTC', payload: {}, missed_fires: 'window', missed_window_ms: 7_200_000, priority: 4, max_attempts: 2 },
      { name: 'pulse', cron: null, every_ms: 90_000, fire_limit: 3, fires: 0, start_at: new Date('2099-01-01T00:00:00Z'), end_at: new Date('2099-01-02T00:00:00Z'), time_zone: 'Europe/Paris', payload: { day: '{{fireDate}}', who: '{{name}}' }, missed_fires: 'skip', missed_window_ms: null, priority: 0, max_attempts: null },
    ]);
    // The fire command fills the template in (and the limit does not count it).
    const fired = await cli('schedules', 'fire', 'pulse');
    expect(fired.code).toBe(0);
    const { rows: jobs } = await sql.query<{ payload: { day: string; who: string; _schedule: { fireAt: string } } }>(`SELECT payload FROM background_jobs WHERE queue_name = 'pulses'`);
    expect(jobs[0].payload.who).toBe('pulse');
    expect(jobs[0].payload.day).toBe(new Intl.DateTimeFormat('en-CA', { timeZone: 'Europe/Paris' }).format(new Date(jobs[0].payload._schedule.fireAt)));

    // As if it had fired its three times: ended, and the list says so.
    await sql.query(`UPDATE background_schedules SET fires = 3, next_fire_at = NULL, last_fire_at = '2099-01-01T00:03:00Z' WHERE name = 'pulse'`);
    const list = await cli('schedules', 'list');
    const lines = list.stdout.trimEnd().split('\n');
    const cells = (name: string) => lines.find((l) => l.startsWith(`${name} `))!.trim().split(/\s{2,}/);
    expect(cells('pulse')).toEqual(['pulse', 'pulses', 'every 90s', 'Europe/Paris', '2099-01-01T00:03:00.000Z', '3/3', '2099-01-01T00:00:00.000Z', '2099-01-02T00:00:00.000Z', 'ended:limit', 'runtime']);
    expect(cells('nightly')).toEqual(['nightly', 'reports', '0 3 * * *', 'UTC', expect.stringMatching(/T03:00:00\.000Z$/), '0', 'active', 'runtime']);
    const json = JSON.parse((await cli('schedules', 'list', '--json')).stdout) as Record<string, unknown>[];
    expect(json.find((s) => s.name === 'pulse')).toMatchObject({
      cron: null, every: 90_000, limit: 3, fires: 3, firesLeft: 0, startDate: '2099-01-01T00:00:00.000Z', endDate: '2099-01-02T00:00:00.000Z', nextFireAt: null, ended: 'limit',
    });
    // A higher limit brings it back, from its start.
    expect((await cli('schedules', 'set', 'pulse', '--queue', 'pulses', '--every', '90s', '--limit', '5', '--start', '2099-01-01T00:00:00Z')).stdout).toBe(
      'set schedule pulse: every 90s into queue pulses; next fire 2099-01-01T00:00:00.000Z; 2 of 5 fire(s) left\n',
    );
    expect((await cli('schedules', 'remove', 'pulse')).stderr).toContain('remove the schedule pulse (queue pulses, every 90s)');

    // Bad usage: exit 2, the library's own message, nothing stored.
    const bad = async (...args: string[]) => {
      const out = await cli('schedules', 'set', 'bad', '--queue', 'q', ...args);
      expect(out.code).toBe(2);
      return out.stderr;
    };
    expect(await bad('--cron', '* * * * *', '--every', '1m')).toContain('--cron and --every exclude each other');
    expect(await bad()).toContain('give --cron <expression> or --every <duration>');
    expect(await bad('--every', '500ms')).toContain('upsertSchedule("bad"): invalid every 500: expected an integer number of milliseconds from 1000 (1 s)');
    expect(await bad('--every', '1m', '--limit', '0')).toContain('--limit "0" is not a whole number from 1');
    expect(await bad('--every', '1m', '--start', '2099-02-30T00:00:00Z')).toContain('--start "2099-02-30T00:00:00Z" is not a date-time that exists (February 2099 has 28 days)');
    expect(await bad('--every', '1m', '--start', '2099-01-02T00:00:00Z', '--end', '2099-01-01T00:00:00Z')).toContain('endDate 2099-01-01T00:00:00.000Z is not after startDate 2099-01-02T00:00:00.000Z');
    expect(await bad('--every', '1m', '--missed-fires', '1h')).toContain('missedFires {"windowMs":3600000} given with every');
    expect(await bad('--every', '1m', '--payload', '{"x":"{{nope}}"}')).toContain('payload.x holds the placeholder {{nope}}');
    expect(await bad('--every', '1m', '--payload', '{oops')).toContain('the payload is not JSON');
    expect((await sql.query(`SELECT name FROM background_schedules WHERE name = 'bad'`)).rows).toEqual([]);
  }, 120_000);

  describe('doctor', () => {
    const checks = async (args: string[], env: Record<string, string>) => {
      const result = await runCli(['doctor', '--json', ...args], env);
      return { code: result.code, stderr: result.stderr, checks: Object.fromEntries((JSON.parse(result.stdout) as { check: string; state: string; detail: string }[]).map((c) => [c.check, c])) };
    };

    // Every check connects: a wrong password was reported six times, once per check (issue 18 item 9).
    it('a wrong password: reported once, as the connection check, and no other check runs (exit 1)', async () => {
      const wrong = new URL(url);
      wrong.password = 'not-the-password';
      const text = await runCli(['doctor'], { DATABASE_URL: wrong.toString() });
      expect(text.code).toBe(1);
      expect(text.stdout.match(/password authentication failed/g)).toHaveLength(1);
      expect(text.stdout).toMatch(/^fail {2}connection {3}password authentication failed for user "[^"]+" \(28P01\)\n {19}hint: /);
      expect(text.stderr).toBe(`pg-queue: ${CANNOT_CONNECT()}\n`);
      const json = await checks([], { DATABASE_URL: wrong.toString() });
      expect(Object.keys(json.checks)).toEqual(['connection']);
      expect(json.checks.connection).toMatchObject({ state: 'fail', detail: expect.stringContaining('password authentication failed') });
    });

    it('a healthy database: every check ok, exit 0, one line per check', async () => {
      // No job left waiting by the tests above: with no instance running, a due one is flagged (progress).
      await sql.query(`DELETE FROM background_jobs`);
      const result = await cli('doctor');
      expect(result.code).toBe(0);
      expect(result.stdout.split('\n').filter(Boolean).map((l) => l.split(/\s+/).slice(0, 2).join(' '))).toEqual([
        'ok schema', 'ok indexes', 'ok autovacuum', 'ok leases', 'ok instances', 'ok progress', 'ok listen', 'ok pooler',
      ]);
    });

    it('finds pending migrations, a missing and an INVALID index, lost autovacuum settings, stuck leases (exit 1 when a check fails)', async () => {
      const broken = await createTestDatabase('cli_doctor');
      const env = { DATABASE_URL: broken };
      const empty = await checks([], env);
      expect(empty.code).toBe(1);
      expect(empty.stderr).toBe('pg-queue: 4 check(s) failed\n');
      expect(empty.checks.schema).toMatchObject({ state: 'fail', detail: 'no queue migration applied' });
      expect(empty.checks.autovacuum).toMatchObject({ state: 'fail', detail: 'table background_jobs does not exist' });
      expect(empty.checks.indexes.state).toBe('fail');
      expect(empty.checks.leases).toMatchObject({ state: 'fail', detail: expect.stringContaining('the check failed: relation "background_jobs" does not exist') });
      expect(empty.checks.listen.state).toBe('ok');

      expect((await runCli(['migrate'], env)).code).toBe(0);
      expect((await runCli(['migrate', 'down', '--yes'], env)).code).toBe(0);
      expect((await runCli(['migrate', 'down', '--yes'], env)).code).toBe(0);
      const db = new pg.Client({ connectionString: broken });
      await db.connect();
      try {
        await db.query(`DROP INDEX background_jobs_finished_idx`);
        await db.query(`UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'background_jobs_delayed_idx'::regclass`);
        await db.query(`ALTER TABLE background_jobs RESET (autovacuum_vacuum_scale_factor)`);
        await db.query(`INSERT INTO background_jobs (queue_name, payload, status, locked_by, lease_expires_at) VALUES ('q', '{}', 'processing', 'gone', now() - interval '1 minute'), ('q', '{}', 'processing', 'alive', now() + interval '1 minute')`);
      } finally {
        await db.end();
      }
      const result = await checks([], env);
      expect(result.code).toBe(1);
      const names = PG_QUEUE_MIGRATIONS.map((M) => new M().name!);
      expect(result.checks.schema).toMatchObject({ state: 'warn', detail: `${names.length - 2} of ${names.length} queue migrations applied; pending: ${names.slice(-2).join(', ')}` });
      expect(result.checks.indexes).toMatchObject({
        state: 'fail',
        detail: 'INVALID (a concurrent build that failed): background_jobs_delayed_idx; missing: background_jobs_finished_idx',
      });
      expect(result.checks.autovacuum).toMatchObject({ state: 'warn', detail: expect.stringContaining('background_jobs lacks autovacuum_vacuum_scale_factor') });
      expect(result.checks.leases).toMatchObject({ state: 'warn', detail: expect.stringMatching(/^1 running job\(s\) whose lease ended more than 10s ago/) });
      expect((await checks(['--sweep-interval', '1m'], env)).checks.leases.state).toBe('ok');
    });

    (pgBouncerAvailable() ? it : it.skip)('detects PgBouncer in transaction mode (warn without --transaction-pooler, ok with it)', async () => {
      const bouncer = await startPgBouncer(process.env.PG_QUEUE_TEST_SERVER_URL!, { poolMode: 'transaction', poolSize: 4 });
      try {
        const bounced = withDatabaseName(bouncer.url, new URL(url).pathname.slice(1));
        const without = await checks([], { DATABASE_URL: bounced });
        expect(without.checks.pooler).toMatchObject({ state: 'warn', detail: expect.stringContaining('transaction pooler detected') });
        expect(without.checks.schema.state).toBe('ok');
        const withFlag = await runCli(['--transaction-pooler', 'doctor', '--json'], { DATABASE_URL: bounced });
        const pooler = (JSON.parse(withFlag.stdout) as { check: string; state: string }[]).find((c) => c.check === 'pooler');
        expect(pooler?.state).toBe('ok');
        // Through the pooler the other commands work too (unnamed statements).
        expect((await runCli(['--transaction-pooler', 'stats'], { DATABASE_URL: bounced })).code).toBe(0);
      } finally {
        await bouncer.stop();
      }
    });
  });
});
