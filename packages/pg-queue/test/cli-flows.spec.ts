import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplicationContext } from '@nestjs/common';
import { createTestDatabase } from '@internal/pg-harness';
import { spawnSync } from 'node:child_process';
import pg from 'pg';
import { QueueService, type EnqueuedFlow } from 'nestjs-pg-queue';
import { buildCli, runCli, runCliOnTerminal } from './support/run-cli.js';
import { startApp } from './support/test-app.js';

// `pg-queue flows ...` and the blocked status in `jobs list` and `stats`: the real binary (dist/cli/main.js, built
// by tsc -b) against a real database, flows made by the library's own enqueueFlow (no workers run: the flows stay
// where the test puts them).
describe('pg-queue flows', () => {
  let url: string;
  let sql: pg.Pool;
  let app: INestApplicationContext;
  let queue: QueueService;
  let checkout: EnqueuedFlow;
  let nightly: EnqueuedFlow;
  let gone: EnqueuedFlow;
  const cli = (...args: string[]) => runCli(args, { DATABASE_URL: url });
  const flowRow = async (id: string) => (await sql.query<{ status: string; reason: string | null }>('SELECT status, reason FROM background_flows WHERE id = $1', [id])).rows[0];
  const jobStatuses = async (flowId: string) =>
    Object.fromEntries((await sql.query<{ ref: string; status: string }>('SELECT j.flow_ref AS ref, j.status::text FROM background_jobs AS j WHERE j.flow_id = $1 ORDER BY j.id', [flowId])).rows.map((r) => [r.ref, r.status]));

  beforeAll(async () => {
    await buildCli();
    url = await createTestDatabase('cli_flows');
    sql = new pg.Pool({ connectionString: url, max: 2 });
    app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    queue = app.get(QueueService);
    checkout = await queue.enqueueFlow({
      name: 'checkout',
      jobs: [
        { ref: 'reserve', queue: 'stock', payload: { sku: 'a' } },
        { ref: 'charge', queue: 'payments', payload: { cents: 500 }, dependsOn: ['reserve'], compensate: { queue: 'refunds', payload: { cents: 500 } } },
        { ref: 'ship', queue: 'shipping', payload: {}, dependsOn: [{ ref: 'charge', onFailure: 'cancel' }, 'reserve'] },
      ],
    });
    nightly = await queue.enqueueFlow({ name: 'nightly', jobs: [{ ref: 'only', queue: 'stock', payload: {} }] });
    // Completed by hand, then the flow step the queue's completion statement takes (raw SQL runs none).
    await sql.query(`UPDATE background_jobs SET status = 'completed', attempts = 1, finished_at = now() WHERE id = $1`, [nightly.jobs.only]);
    await sql.query(`SELECT pg_queue_flow_step(id, flow_id, flow_ref, compensates, 'processing', 'completed') FROM background_jobs WHERE id = $1`, [nightly.jobs.only]);
    gone = await queue.enqueueFlow({ jobs: [{ ref: 'x', queue: 'stock', payload: {} }] });
    await queue.cancelFlow(gone.id);
  }, 180_000);

  afterAll(async () => {
    await app?.close();
    await sql?.end();
  });

  it('--help lists flows and its subcommands', async () => {
    expect((await runCli(['--help'])).stdout).toMatch(/^ {2}flows /m);
    const help = await runCli(['flows', '--help']);
    expect(help.code).toBe(0);
    for (const command of ['list', 'show', 'cancel']) expect(help.stdout).toMatch(new RegExp(`^ {2}${command}`, 'm'));
  });

  it('flows list: newest first, --status, --limit, --json (one flow per line); a bad status exits 2', async () => {
    const table = await cli('flows', 'list');
    expect(table.code).toBe(0);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0].split(/\s{2,}/)).toEqual(['id', 'name', 'status', 'jobs', 'created at', 'finished at', 'reason']);
    expect(lines.slice(2).map((l) => l.trim().split(/\s+/).slice(0, 4))).toEqual([
      [gone.id, 'cancelled', '1', expect.stringMatching(/^20\d\d-/)],
      [nightly.id, 'nightly', 'completed', '1'],
      [checkout.id, 'checkout', 'running', '3'],
    ]);
    expect(lines.at(-3)).toMatch(/cancelled$/); // the reason column

    const json = await cli('flows', 'list', '--json');
    const flows = json.stdout.trim().split('\n').map((line) => JSON.parse(line));
    const { rows } = await sql.query(`SELECT f.id::text AS id, f.name, f.status, f.reason FROM background_flows AS f ORDER BY f.id DESC`);
    expect(flows.map(({ id, name, status, reason }) => ({ id, name, status, reason }))).toEqual(rows);
    expect(flows[2]).toEqual({ id: checkout.id, name: 'checkout', status: 'running', reason: null, createdAt: expect.any(String), finishedAt: null, jobs: 3 });

    expect((await cli('flows', 'list', '--status', 'completed', '--json')).stdout.trim().split('\n').map((l) => JSON.parse(l).id)).toEqual([nightly.id]);
    expect((await cli('flows', 'list', '--status', 'failed')).stdout).toBe('no flows\n');
    const limited = await cli('flows', 'list', '--limit', '2');
    expect(limited.stdout.trimEnd().split('\n').slice(2)).toHaveLength(3);
    expect(limited.stdout).toContain('the newest 2 shown: raise --limit for more\n');

    const bad = await cli('flows', 'list', '--status', 'done');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('expected one of running, failing, compensating, completed, failed, compensated, compensation_failed, cancelled');
  });

  it('flows show: the flow, its jobs (what blocked ones wait for) and its edges; --json is getFlow\'s record; a missing id exits 1, a bad one 2', async () => {
    const shown = await cli('flows', 'show', checkout.id);
    expect(shown.code).toBe(0);
    const [head, jobs, edges] = shown.stdout.trimEnd().split('\n\n');
    expect(head.split('\n').map((l) => l.replace(/\s+/g, ' ').trim())).toEqual([
      `id ${checkout.id}`, 'name checkout', 'status running', 'reason', 'failed job', expect.stringMatching(/^created at 20\d\d-/), expect.stringMatching(/^updated at 20\d\d-/), 'finished at',
    ]);
    const j = checkout.jobs;
    const jobLines = jobs.split('\n');
    expect(jobLines[0].split(/\s{2,}/)).toEqual(['id', 'ref', 'queue', 'status', 'attempts', 'waiting for', 'compensates', 'last error']);
    // What a blocked job waits for, in the order getFlow gives it.
    const waiting = (refs: string) => refs.split(', ').sort().join(', ');
    expect(jobLines.slice(2).map((l) => l.trim().split(/\s{2,}/)).map((cells) => (cells[5] ? [...cells.slice(0, 5), waiting(cells[5])] : cells))).toEqual([
      [j.reserve, 'reserve', 'stock', 'queued', '0/5'],
      [j.charge, 'charge', 'payments', 'blocked', '0/5', 'reserve'],
      [j.ship, 'ship', 'shipping', 'blocked', '0/5', 'charge, reserve'],
    ]);
    const edgeLines = edges.split('\n');
    expect(edgeLines[0].split(/\s{2,}/)).toEqual(['parent', 'child', 'on failure', 'edge']);
    expect(edgeLines.slice(2).map((l) => l.trim().split(/\s{2,}/)).sort()).toEqual(
      [
        [`reserve (${j.reserve})`, `charge (${j.charge})`, 'fail', 'open'],
        [`charge (${j.charge})`, `ship (${j.ship})`, 'cancel', 'open'],
        [`reserve (${j.reserve})`, `ship (${j.ship})`, 'fail', 'open'],
      ].sort(),
    );

    const json = await cli('flows', 'show', checkout.id, '--json');
    expect(JSON.parse(json.stdout)).toEqual(JSON.parse(JSON.stringify(await queue.getFlow(checkout.id))));

    expect(await cli('flows', 'show', '999999')).toEqual({ code: 1, stdout: '', stderr: 'pg-queue: flow 999999 not found\n' });
    expect(await cli('flows', 'show', 'abc')).toEqual({ code: 2, stdout: '', stderr: 'pg-queue: "abc" is not a flow id (a positive integer)\n' });
  });

  it('blocked jobs: jobs list --status blocked lists them, stats has a column for them', async () => {
    const ids = async (...args: string[]) => (await cli('jobs', 'list', '--json', '--oldest-first', ...args)).stdout.trim().split('\n').filter(Boolean).map((line) => JSON.parse(line).id as string);
    const { rows } = await sql.query<{ id: string }>(`SELECT j.id::text AS id FROM background_jobs AS j WHERE j.status = 'blocked' ORDER BY j.id`);
    expect(rows.map((r) => r.id)).toEqual([checkout.jobs.charge, checkout.jobs.ship]);
    expect(await ids('--status', 'blocked')).toEqual([checkout.jobs.charge, checkout.jobs.ship]);
    expect(await ids('--status', 'blocked', '--queue', 'shipping')).toEqual([checkout.jobs.ship]);
    // No filter: every status, blocked jobs included.
    expect(await ids()).toHaveLength(Number((await sql.query(`SELECT count(*)::int AS n FROM background_jobs`)).rows[0].n));

    const stats = await cli('stats');
    expect(stats.stdout.split('\n').map((l) => l.replace(/\s+/g, ' ').trim())).toEqual([
      'queue queued blocked processing completed failed cancelled paused',
      expect.stringMatching(/^-+ -+ -+ -+ -+ -+ -+ -+$/),
      'payments 0 1 0 0 0 0',
      'shipping 0 1 0 0 0 0',
      'stock 1 0 0 1 0 1',
      '',
    ]);
    expect(JSON.parse((await cli('stats', '--json')).stdout).queues.shipping).toEqual({ queued: 0, blocked: 1, processing: 0, completed: 0, failed: 0, cancelled: 0 });
    // A blocked job is never the target of a bulk cancel (its flow is): bad usage, nothing changed.
    const refused = await cli('jobs', 'cancel', '--status', 'blocked', '--yes');
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('jobs cancel applies to queued or processing jobs; --status blocked matches none it could change');
  });

  it('flows cancel: asks (refused without --yes when stdin is not a terminal), then cancels every job that can still run and the flow', async () => {
    // reserve is running (a worker holds it): the cancel tells its worker to abort it.
    await sql.query(`UPDATE background_jobs SET status = 'processing', attempts = 1, locked_by = 'w1', locked_at = now(), lease_expires_at = now() + interval '1 minute' WHERE id = $1`, [checkout.jobs.reserve]);
    const refused = await cli('flows', 'cancel', checkout.id);
    expect(refused).toEqual({
      code: 2,
      stdout: '',
      stderr: `pg-queue: cancel flow ${checkout.id} ("checkout", running): 2 blocked and 1 running job(s) stop: not confirmed (stdin is not a terminal, so no question can be asked); pass --yes to go ahead\n`,
    });
    expect(await flowRow(checkout.id)).toEqual({ status: 'running', reason: null });

    const listener = await sql.connect();
    const heard: string[] = [];
    try {
      listener.on('notification', (n) => heard.push(`${n.channel} ${n.payload}`));
      await listener.query('LISTEN pg_queue_cancel');
      const done = await cli('flows', 'cancel', checkout.id, '--yes');
      expect(done).toEqual({ code: 0, stdout: `cancelled flow ${checkout.id}: 3 job(s) cancelled, 1 running job(s) told to abort\n`, stderr: '' });
      await sql.query('SELECT 1');
      for (let i = 0; i < 50 && heard.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
      expect(heard).toEqual([`pg_queue_cancel ${checkout.jobs.reserve}:0`]);
    } finally {
      listener.release(true);
    }
    expect(await flowRow(checkout.id)).toEqual({ status: 'cancelled', reason: 'cancelled' });
    expect(await jobStatuses(checkout.id)).toEqual({ reserve: 'cancelled', charge: 'cancelled', ship: 'cancelled' });
    // No compensation ran: charge never completed, and a cancelled flow is not compensated.
    expect((await sql.query(`SELECT count(*)::int AS n FROM background_jobs WHERE compensates IS NOT NULL`)).rows[0].n).toBe(0);

    expect(await cli('flows', 'cancel', checkout.id, '--yes')).toEqual({ code: 0, stdout: `flow ${checkout.id} has already finished (cancelled): nothing to cancel\n`, stderr: '' });
    expect(await cli('flows', 'cancel', nightly.id)).toEqual({ code: 0, stdout: `flow ${nightly.id} has already finished (completed): nothing to cancel\n`, stderr: '' });
    expect(await cli('flows', 'cancel', '999999', '--yes')).toEqual({ code: 1, stdout: '', stderr: 'pg-queue: flow 999999 not found\n' });
    expect((await cli('flows', 'cancel', '0')).code).toBe(2);
  });

  (spawnSync('script', ['--version']).status === 0 ? it : it.skip)('flows cancel on a terminal asks; y cancels, anything else changes nothing (exit 1)', async () => {
    const flow = await queue.enqueueFlow({ name: 'asked', jobs: [{ ref: 'a', queue: 'stock', payload: {} }, { ref: 'b', queue: 'stock', payload: {}, dependsOn: ['a'] }] });
    const onTerminal = (args: string, answer: string) => runCliOnTerminal(args, answer, url);
    const declined = await onTerminal(`flows cancel ${flow.id}`, 'n');
    expect(declined.output).toContain(`Cancel flow ${flow.id} ("asked", running): 1 queued and 1 blocked job(s) stop? [y/N]`);
    expect(declined.output).toContain('pg-queue: not confirmed: nothing changed');
    expect(declined.code).toBe(1);
    expect(await flowRow(flow.id)).toEqual({ status: 'running', reason: null });

    const accepted = await onTerminal(`flows cancel ${flow.id}`, 'y');
    expect(accepted.code).toBe(0);
    expect(accepted.output).toContain(`cancelled flow ${flow.id}: 2 job(s) cancelled, 0 running job(s) told to abort`);
    expect(await flowRow(flow.id)).toEqual({ status: 'cancelled', reason: 'cancelled' });
    expect(await jobStatuses(flow.id)).toEqual({ a: 'cancelled', b: 'cancelled' });
  });
});
