import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

// `npm start` as a user runs it: the built demo as its own process, with its own embedded PostgreSQL.
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const MAIN = join(ROOT, 'apps/demo/dist/main.js');

interface Demo {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

function startDemo(env: Record<string, string>): Demo {
  const { DATABASE_URL: _url, NODE_OPTIONS: _jestOptions, ...rest } = process.env; // the demo's own embedded server, whatever the suite runs on
  const child = spawn(process.execPath, [MAIN], { cwd: ROOT, env: { ...rest, DEMO_START_BURST: '0', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output: () => output, exited };
}

async function waitForOutput(demo: Demo, text: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!demo.output().includes(text)) {
    if (demo.child.exitCode !== null || Date.now() > deadline) throw new Error(`the demo did not print "${text}":\n${demo.output()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The database URL a demo's banner prints. */
function databaseUrlIn(output: string): string {
  const found = /Database URL: (\S+)/.exec(output);
  if (!found) throw new Error(`no database URL in the banner:\n${output}`);
  return found[1];
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z ');
  } catch {
    return false;
  }
}

describe('the demo as a process (npm start)', () => {
  let folder: string;
  beforeAll(async () => {
    const tsc = createRequire(join(ROOT, 'package.json')).resolve('typescript/bin/tsc');
    execFileSync(process.execPath, [tsc, '-b', 'apps/demo'], { cwd: ROOT, stdio: 'inherit' }); // what npm start builds; instant when up to date
    folder = await mkdtemp(join(tmpdir(), 'demo-process-'));
    await chmod(folder, 0o755); // our own test folder: as root, the postgres user must reach the data folder inside
  }, 120_000);
  afterAll(async () => {
    if (!folder) return;
    // A failed test must not leave a server running: stop whatever still holds a data folder of ours.
    for (const dataDir of ['port-taken', 'killed', 'stops'].map((name) => join(folder, name, 'pg'))) {
      const pid = existsSync(join(dataDir, 'postmaster.pid')) ? Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]) : 0;
      if (pid > 0 && alive(pid)) process.kill(pid, 'SIGINT');
      while (pid > 0 && alive(pid)) await new Promise((r) => setTimeout(r, 50));
    }
    await rm(folder, { recursive: true, force: true });
  });

  it('with its port taken, exits at once with one line naming PORT, before starting anything', async () => {
    const taken: Server = createServer();
    await new Promise<void>((resolve) => taken.listen(0, resolve));
    const port = (taken.address() as { port: number }).port;
    try {
      const dataDir = join(folder, 'port-taken', 'pg');
      const demo = startDemo({ PORT: String(port), DEMO_DATA_DIR: dataDir });
      expect(await demo.exited).toBe(2);
      expect(demo.output().trim()).toBe(
        `port ${port} is already in use: stop what listens there, or choose another port with PORT (e.g. PORT=${port + 1} npm start; a second demo on the same data folder shares the running one's database)`,
      );
      expect(existsSync(dataDir)).toBe(false); // no database started, so no start-up burst enqueued either
    } finally {
      taken.close();
    }
  });

  it('prints the database URL and a CLI line for it; a second demo on the folder shares the server; killed, the next start stops the orphan; the URL stays', async () => {
    const dataDir = join(folder, 'killed', 'pg');
    const first = startDemo({ PORT: '0', DEMO_DATA_DIR: dataDir });
    await waitForOutput(first, 'demo listening on');
    const running = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    const databaseUrl = databaseUrlIn(first.output());
    expect(first.output()).toContain(`  export DATABASE_URL=${databaseUrl}\n`);
    expect(first.output()).toContain(`  npx pg-queue stats\n`);
    expect(readFileSync(`${dataDir}.port`, 'utf8')).toBe(`${new URL(databaseUrl).port}\n`);
    // The URL is the one the CLI needs: it reaches the demo's database, with the queue's table.
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    const { rows } = await client.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_jobs`);
    await client.end();
    expect(rows[0].n).toBeGreaterThanOrEqual(0);

    // While its app runs, the server is not stale: a second demo on the same folder (the port advice's
    // PORT=3001 npm start) shares it, and leaves it running when it stops.
    const second = startDemo({ PORT: '0', DEMO_DATA_DIR: dataDir });
    await waitForOutput(second, 'demo listening on');
    expect(second.output()).toContain(`shared with the demo running as pid ${first.child.pid} (it stops this PostgreSQL when it stops)`);
    expect(databaseUrlIn(second.output())).toBe(databaseUrl);
    second.child.kill('SIGINT');
    expect(await second.exited).toBe(0);
    expect(alive(running)).toBe(true);

    first.child.kill('SIGKILL');
    await first.exited;
    const orphan = running;
    expect(alive(orphan)).toBe(true);

    const third = startDemo({ PORT: '0', DEMO_DATA_DIR: dataDir });
    try {
      await waitForOutput(third, 'demo listening on');
      expect(third.output()).toContain(`stopping PostgreSQL (pid ${orphan}) left running on ${dataDir} by an earlier run that was killed`);
      expect(alive(orphan)).toBe(false);
      // The same port, so the same URL as before: a CLI line copied from the first banner still works.
      expect(databaseUrlIn(third.output())).toBe(databaseUrl);
    } finally {
      third.child.kill('SIGINT');
      expect(await third.exited).toBe(0);
    }
    const lock = join(dataDir, 'postmaster.pid');
    expect(existsSync(lock)).toBe(false); // stopped in order on SIGINT: nothing left running
  }, 120_000);

  it('stops quietly on Ctrl-C while jobs run, every time: the pools close before PostgreSQL stops, so no session is killed', async () => {
    // Issue 44: 2 of 10 stops printed "[postgres] FATAL: terminating connection ..." and "an idle connection of the
    // queue's ... pool failed" (pg's pool.end() resolved before its connections had closed). Five stops in a row, each
    // while a start-up burst runs (retries, timeouts, dead letters), at a different moment.
    const dataDir = join(folder, 'stops', 'pg');
    for (let stop = 0; stop < 5; stop++) {
      const demo = startDemo({ PORT: '0', DEMO_DATA_DIR: dataDir, DEMO_START_BURST: '30' });
      await waitForOutput(demo, 'Ctrl-C stops');
      await new Promise((r) => setTimeout(r, 150 * stop));
      demo.child.kill('SIGINT');
      const code = await demo.exited;
      const noise = demo.output().split('\n').filter((line) => /FATAL|PANIC|terminating connection|idle connection of|closing the app failed/.test(line));
      expect({ stop, code, noise }).toEqual({ stop, code: 0, noise: [] });
      expect(demo.output()).toContain('PostgreSQL stopped');
    }
  }, 240_000);
});
