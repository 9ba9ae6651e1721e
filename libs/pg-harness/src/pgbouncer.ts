import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chown, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Debian's `pgbouncer` package puts it here. */
export const PGBOUNCER_BINARY = '/usr/sbin/pgbouncer';

export interface PgBouncer {
  /** `serverUrl` with host and port replaced by PgBouncer's (same user, password and database). */
  url: string;
  stop(): Promise<void>;
}

export interface StartPgBouncerOptions {
  poolMode?: 'session' | 'transaction' | 'statement';
  /** Server connections per database/user pair. Default 20. */
  poolSize?: number;
  binary?: string;
}

/** True when the PgBouncer binary is installed (tests skip with a note when it is not). */
export function pgBouncerAvailable(binary = PGBOUNCER_BINARY): boolean {
  return existsSync(binary);
}

/**
 * Runs a real PgBouncer in front of `serverUrl` (any database name maps to the same name on that server),
 * on a free local port, from an ini and a userlist in a temp folder. As root it runs as the `postgres`
 * user (`-u`), since PgBouncer refuses to run as root. Its log is in the error when it fails to start.
 */
export async function startPgBouncer(serverUrl: string, options: StartPgBouncerOptions = {}): Promise<PgBouncer> {
  const binary = options.binary ?? PGBOUNCER_BINARY;
  const server = new URL(serverUrl);
  const user = decodeURIComponent(server.username);
  const password = decodeURIComponent(server.password);
  const port = await freePort();
  const dir = await mkdtemp(join(tmpdir(), 'pg-queue-pgbouncer-'));
  const asRoot = process.getuid?.() === 0;
  const log = join(dir, 'pgbouncer.log');
  await writeFile(
    join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = host=${server.hostname} port=${server.port || 5432}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      "unix_socket_dir = ''",
      'auth_type = md5',
      `auth_file = ${join(dir, 'userlist.txt')}`,
      `pool_mode = ${options.poolMode ?? 'transaction'}`,
      `default_pool_size = ${options.poolSize ?? 20}`,
      'max_client_conn = 1000',
      `logfile = ${log}`,
      `pidfile = ${join(dir, 'pgbouncer.pid')}`,
      'admin_users = ',
      '',
    ].join('\n'),
  );
  await writeFile(join(dir, 'userlist.txt'), `"${user}" "${password}"\n`);
  if (asRoot) {
    const { uid, gid } = await postgresUser();
    for (const f of ['', 'pgbouncer.ini', 'userlist.txt']) await chown(join(dir, f), uid, gid);
  }
  const child = spawn(binary, [...(asRoot ? ['-u', 'postgres'] : []), join(dir, 'pgbouncer.ini')], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  // A binary that cannot be started (not installed: ENOENT) emits 'error' and no 'exit': without a listener the error
  // reached the test's process as uncaught, and the caller waited for ever (the simulation's seed 52 on a machine
  // without PgBouncer: 480 s to its timeout).
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => resolve(code));
    child.once('error', (error) => {
      stderr += `${error.message}\n`;
      resolve(null);
    });
  });
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null && child.pid !== undefined) child.kill('SIGTERM');
    await exited;
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await Promise.race([waitUntilAccepting(port, child, 10_000), exited.then((code) => Promise.reject(new Error(`it exited (${code ?? child.signalCode ?? 'not started'})`)))]);
  } catch (error) {
    const text = await readFile(log, 'utf8').catch(() => '');
    await stop();
    throw new Error(`PgBouncer did not start: ${(error as Error).message}\n${stderr}${text}`);
  }
  const url = new URL(serverUrl);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return { url: url.toString(), stop };
}

/** uid and gid of the `postgres` OS user (PgBouncer refuses to run as root). */
async function postgresUser(): Promise<{ uid: number; gid: number }> {
  const line = (await readFile('/etc/passwd', 'utf8')).split('\n').find((l) => l.startsWith('postgres:'));
  if (!line) throw new Error('PgBouncer refuses to run as root, and there is no postgres user to run it as.');
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

async function waitUntilAccepting(port: number, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`it exited (${child.exitCode ?? child.signalCode})`);
    const up = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (up) return;
    if (Date.now() > deadline) throw new Error(`nothing accepted on port ${port} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}
