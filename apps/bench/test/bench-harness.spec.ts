import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createTestDatabase } from '@internal/pg-harness';
import { plainSqlAdapter } from '../src/adapters/plain-sql.js';
import { pgQueueAdapter } from '../src/adapters/pg-queue.js';
import type { BenchPayload, RunningSystem } from '../src/adapters/types.js';
import { parseCli, pgChoice } from '../src/cli.js';
import { pinServer, planPinning } from '../src/host/pin-cpus.js';
import { sampleWaits, setNotifyTriggers } from '../src/db/wait-events.js';
import { runRatios, type Sample } from '../src/report/aggregate.js';

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('the plain SQL loop (the reference the library must reach 0.9x of)', () => {
  let url: string;
  let db: pg.Pool;
  const seen: number[] = [];
  let worker: RunningSystem | undefined;
  let producer: RunningSystem | undefined;

  beforeAll(async () => {
    url = await createTestDatabase('bench_plain');
    db = new pg.Pool({ connectionString: url, max: 2 });
    // The benchmark does this before any plain-sql process starts: the library's migrations make the table.
    const setup = await pgQueueAdapter.start({ url, role: 'producer', concurrency: 1, poolSize: 2, onJob: () => {} });
    await setup.stop();
  });
  afterAll(async () => {
    await worker?.stop();
    await producer?.stop();
    await db?.end();
  });

  it('refuses to start on a database without the library\'s table', async () => {
    const empty = await createTestDatabase('bench_plain_empty');
    await expect(plainSqlAdapter.start({ url: empty, role: 'producer', concurrency: 1, poolSize: 2, onJob: () => {} })).rejects.toThrow(/background_jobs/);
  });

  it('runs every job exactly once on the library\'s table, in claims of at most 100, and records each as completed', async () => {
    const jobs = 1_234;
    worker = await plainSqlAdapter.start({ url, role: 'worker', concurrency: 5, poolSize: 10, onJob: (p: BenchPayload) => void seen.push(p.i) });
    producer = await plainSqlAdapter.start({ url, role: 'producer', concurrency: 1, poolSize: 2, onJob: () => {} });
    const ids = await producer.enqueueMany(Array.from({ length: jobs }, (_, i) => ({ i })));
    expect(ids).toBe(jobs);
    await waitFor('every job completed', async () => {
      const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_jobs WHERE status = 'completed'`);
      return rows[0].n === jobs;
    });
    expect([...seen].sort((a, b) => a - b)).toEqual(Array.from({ length: jobs }, (_, i) => i));
    const { rows } = await db.query<{ attempts: number; finished: boolean; n: number }>(
      `SELECT attempts, finished_at IS NOT NULL AS finished, count(*)::int AS n FROM background_jobs GROUP BY 1, 2`,
    );
    expect(rows).toEqual([{ attempts: 1, finished: true, n: jobs }]);
    // Claims of at most 100: rows claimed by one statement share its now() as locked_at.
    const batches = await db.query<{ biggest: number; claims: number }>(
      `SELECT max(n)::int AS biggest, count(*)::int AS claims FROM (SELECT count(*) AS n FROM background_jobs GROUP BY locked_at) AS c`,
    );
    expect(batches.rows[0].biggest).toBeLessThanOrEqual(100);
    expect(batches.rows[0].claims).toBeGreaterThanOrEqual(Math.ceil(jobs / 100));
  });
});

describe('the NOTIFY trigger switch of the concurrent-enqueue reference row', () => {
  let url: string;
  let db: pg.Client;
  let listener: pg.Client;
  const heard: string[] = [];

  beforeAll(async () => {
    url = await createTestDatabase('bench_notify');
    db = new pg.Client({ connectionString: url });
    await db.connect();
    await db.query(`
      CREATE TABLE jobs (id bigserial PRIMARY KEY, note text);
      CREATE FUNCTION jobs_notify() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_notify('jobs_channel', 'new'); RETURN NULL; END $$;
      CREATE FUNCTION jobs_touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.note := coalesce(NEW.note, 'touched'); RETURN NEW; END $$;
      CREATE TRIGGER jobs_notify AFTER INSERT ON jobs FOR EACH STATEMENT EXECUTE FUNCTION jobs_notify();
      CREATE TRIGGER jobs_touch BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION jobs_touch();`);
    listener = new pg.Client({ connectionString: url });
    await listener.connect();
    listener.on('notification', (n) => heard.push(n.channel));
    await listener.query('LISTEN jobs_channel');
  });
  afterAll(async () => {
    await listener?.end();
    await db?.end();
  });

  const enabled = async () =>
    (await db.query<{ tgname: string; tgenabled: string }>(`SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = 'jobs'::regclass AND NOT tgisinternal ORDER BY 1`)).rows;

  it('disables only the triggers that call pg_notify, and no NOTIFY is sent while they are off', async () => {
    expect(await setNotifyTriggers(url, 'jobs', false)).toEqual(['jobs_notify']);
    expect(await enabled()).toEqual([
      { tgname: 'jobs_notify', tgenabled: 'D' },
      { tgname: 'jobs_touch', tgenabled: 'O' },
    ]);
    await db.query('INSERT INTO jobs DEFAULT VALUES');
    await new Promise((r) => setTimeout(r, 300));
    expect(heard).toEqual([]);
    expect((await db.query('SELECT note FROM jobs')).rows).toEqual([{ note: 'touched' }]);
  });

  it('turns them back on', async () => {
    expect(await setNotifyTriggers(url, 'jobs', true)).toEqual(['jobs_notify']);
    expect((await enabled()).map((t) => t.tgenabled)).toEqual(['O', 'O']);
    await db.query('INSERT INTO jobs DEFAULT VALUES');
    await waitFor('the NOTIFY', async () => heard.length === 1, 5_000);
  });

  it('samples the wait events of a database while work runs', async () => {
    const serverUrl = process.env.PG_QUEUE_TEST_SERVER_URL!;
    const database = new URL(url).pathname.slice(1);
    const blocked = new pg.Client({ connectionString: url });
    await blocked.connect();
    try {
      await db.query('BEGIN');
      await db.query('LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE');
      const waiting = blocked.query('SELECT count(*) FROM jobs');
      const { waits } = await sampleWaits(serverUrl, database, new Promise((r) => setTimeout(r, 300)));
      await db.query('COMMIT');
      await waiting;
      expect(waits.samples).toBeGreaterThan(3);
      expect(waits.top).toMatch(/^Lock:relation 1\.0/);
      expect(waits.lockObjectMean).toBe(0);
    } finally {
      await blocked.end();
    }
  });
});

describe('ratios within each run', () => {
  const s = (run: number, system: Sample['system'], value: number): Sample => ({ run, system, metric: 'process.c10', value });

  it('pairs ours with the peer run by run and reports the median with the lowest and highest run', () => {
    const samples = [
      s(1, 'pg-queue', 20), s(1, 'graphile-worker', 10), // 2.0
      s(2, 'pg-queue', 30), s(2, 'graphile-worker', 20), // 1.5
      s(3, 'pg-queue', 12), s(3, 'graphile-worker', 10), // 1.2
      s(4, 'pg-queue', NaN), s(4, 'graphile-worker', 10), // failed run: left out
      s(5, 'graphile-worker', 1), // ours missing: left out
    ];
    expect(runRatios(samples, 'pg-queue')['process.c10']['graphile-worker']).toEqual({ median: 1.5, min: 1.2, max: 2, runs: 3 });
  });
});

describe('choosing the PostgreSQL binaries', () => {
  it('--pg 18 is the embedded build, --pg-bin wins over --pg, and a missing install is named', () => {
    expect(pgChoice('18', undefined)).toEqual({ major: 18, source: expect.stringContaining('embedded') });
    expect(() => pgChoice('fifteen', undefined)).toThrow(/--pg must be a PostgreSQL major version/);
    expect(() => pgChoice(undefined, '/nonexistent/bin')).toThrow(/--pg-bin: no postgres program in \/nonexistent\/bin/);
    if (existsSync('/usr/lib/postgresql/15/bin/postgres')) {
      expect(pgChoice('15', undefined)).toEqual({ binDir: '/usr/lib/postgresql/15/bin', major: 15, source: '--pg 15: /usr/lib/postgresql/15/bin' });
      expect(pgChoice('18', '/usr/lib/postgresql/15/bin').binDir).toBe('/usr/lib/postgresql/15/bin');
    }
    if (!existsSync('/usr/lib/postgresql/11/bin/postgres')) expect(() => pgChoice('11', undefined)).toThrow(/install the postgresql-11 package/);
  });
});

describe('--pin: the server on one half of the cores, the Node processes on the other', () => {
  const twoCores = cpus().length >= 2 ? it : it.skip;

  twoCores('pins a postmaster and the processes it has forked, read from its data folder', async () => {
    const plan = planPinning();
    expect(plan).toEqual({ server: cpus().length === 2 ? '0' : `0-${Math.floor(cpus().length / 2) - 1}`, node: expect.any(String) });
    // A stand-in for a server: a process with a child, named by a postmaster.pid in a folder of its own.
    const dir = mkdtempSync(join(tmpdir(), 'pin-'));
    const parent = spawn('sh', ['-c', 'sleep 30 & wait'], { stdio: 'ignore' });
    try {
      writeFileSync(join(dir, 'postmaster.pid'), `${parent.pid}\n${dir}\n`);
      await new Promise((r) => setTimeout(r, 200)); // the shell has forked its sleep
      const pinned = pinServer(dir, plan.server);
      expect(pinned).toHaveLength(2);
      expect(pinned[0]).toBe(parent.pid);
      for (const pid of pinned) expect(execFileSync('taskset', ['-c', '-p', String(pid)], { encoding: 'utf8' })).toMatch(new RegExp(`list: ${plan.server}\\s*$`));
      expect(() => pinServer(join(dir, 'none'), plan.server)).toThrow(/no .*postmaster\.pid; pinning needs the server the benchmark starts itself/);
    } finally {
      parent.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a pinned run is never a complete run (its figures compare only with pinned ones)', () => {
    const all = ['--runs', '3'];
    expect(parseCli(all).complete).toBe(true);
    expect(parseCli([...all, '--pin'])).toMatchObject({ pin: true, complete: false });
  });
});
