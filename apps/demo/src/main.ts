import 'reflect-metadata';
import { Logger, type INestApplication } from '@nestjs/common';
import { startPostgres, type PostgresServer } from '@internal/pg-harness';
import { randomBytes } from 'node:crypto';
import { DataSource } from 'typeorm';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SHUTDOWN_GRACE_MS } from './app.module.js';
import { printBanner } from './banner.js';
import { portProblem } from './check-port.js';
import { createDemoApp } from './create-demo-app.js';
import { DEFAULT_DATABASE_PORT, rememberedPort, rememberPort } from './database-port.js';

const logger = new Logger('Demo');
const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

const port = envInt('PORT', 3000, 0, 65_535);
const startBurst = envInt('DEMO_START_BURST', 30, 0, 10_000);
// Next to the compiled main.js's folder, whatever the working directory: apps/demo/.data/pg (gitignored).
const dataDir = process.env.DEMO_DATA_DIR ?? fileURLToPath(new URL('../.data/pg', import.meta.url));
// The embedded server's last port, beside its data folder: the database URL stays the same across starts.
const portFile = `${dataDir}.port`;
const postgresVerbose = process.env.DEMO_PG_LOG === '1';
// The dashboard's demo password: DEMO_DASHBOARD_PASSWORD, else a new random one per start (printed in the banner).
const dashboardPassword = process.env.DEMO_DASHBOARD_PASSWORD ?? randomBytes(9).toString('base64url');

let server: PostgresServer | undefined;
let app: INestApplication | undefined;
let shuttingDown = false;

ownShutdownSignals();

const booting = boot();
booting.catch((error: unknown) => {
  // A set-up problem the harness cannot work around is one line saying why and what to do; anything else keeps its stack.
  const known = error instanceof Error && error.name === 'PostgresSetupError';
  logger.error(`start-up failed: ${error instanceof Error ? (known ? error.message : (error.stack ?? error.message)) : String(error)}`);
  void shutdown(1);
});

async function boot(): Promise<void> {
  const problem = await portProblem(port);
  if (problem) {
    console.error(problem);
    process.exit(2);
  }
  // containers: false, since a testcontainers database would not live in the kept data folder. shareRunning: a
  // second demo on the same folder (PORT=3001 npm start) uses the first one's server instead of failing on it.
  const remembered = rememberedPort(portFile);
  server = await startPostgres({
    dataDir,
    containers: false,
    port: remembered ?? DEFAULT_DATABASE_PORT,
    shareRunning: true,
    log: postgresLog,
    notice: (m) => logger.warn(m),
  });
  const folder = relative(process.cwd(), server.dataDir ?? dataDir) || '.';
  const database = {
    url: 'the server in DATABASE_URL',
    embedded: `embedded, data in ${folder}`,
    shared: `embedded, data in ${folder}, shared with the demo running as pid ${server.ownerPid} (it stops this PostgreSQL when it stops)`,
    testcontainers: 'a container',
  }[server.source];
  logger.log(server.source === 'embedded' ? `PostgreSQL ready (${database})` : `using ${database}`);
  if (server.source === 'embedded') await keepPort(Number(new URL(server.url).port), remembered);
  if (shuttingDown) return;
  app = await createDemoApp(server.url, { startBurst, dashboardPassword });
  await app.listen(port);
  const address = app.getHttpServer().address();
  const actualPort = typeof address === 'object' && address ? address.port : port;
  printBanner({
    url: `http://localhost:${actualPort}`,
    database,
    databaseUrl: server.url,
    databaseKind: server.source === 'url' ? 'url' : server.source === 'shared' ? 'shared' : 'embedded',
    shutdownGraceMs: SHUTDOWN_GRACE_MS,
    dashboardPassword,
    deadLetterId: await newestDeadLetter(app),
  });
}

/** The newest dead letter, for the banner's retry line (a completed job would answer 409); none on a fresh database. */
async function newestDeadLetter(demo: INestApplication): Promise<string | undefined> {
  const rows: { id: string }[] = await demo.get(DataSource).query(`SELECT id FROM background_jobs WHERE status = 'failed' ORDER BY id DESC LIMIT 1`);
  return rows[0]?.id;
}

/** Records the embedded server's port for the next start; says so when the one remembered was taken. */
async function keepPort(used: number, remembered: number | undefined): Promise<void> {
  if (used === remembered) return;
  if (remembered !== undefined) {
    logger.warn(`PostgreSQL's port ${remembered} (kept in ${relative(process.cwd(), portFile)}) is taken by another program: it listens on ${used} now, and the database URL changed`);
  }
  await rememberPort(portFile, used);
}

/** The demo shuts down in order on a signal: HTTP and workers first, the database last. */
function ownShutdownSignals(): void {
  for (const signal of SIGNALS) process.on(signal, onSignal);
}

function onSignal(signal: NodeJS.Signals): void {
  if (shuttingDown) {
    // A second Ctrl-C: do not wait for the drain. stop() sends PostgreSQL its stop signal synchronously,
    // and PostgreSQL finishes a fast shutdown on its own.
    logger.warn(`${signal} again: exiting without waiting`);
    void server?.stop();
    process.exit(130);
  }
  logger.log(`${signal}: shutting down (running jobs get ${SHUTDOWN_GRACE_MS / 1000} s; a second Ctrl-C forces the exit)`);
  void shutdown(0);
}

async function shutdown(exitCode: number): Promise<void> {
  if (shuttingDown) return;
  shuttingDown = true;
  // A hung step must not leave the process running forever.
  setTimeout(() => {
    logger.error('shutdown is taking too long; exiting');
    process.exit(1);
  }, SHUTDOWN_GRACE_MS + 20_000).unref();
  await booting.catch(() => undefined); // let a half-done start-up settle, then close what it opened
  try {
    // Same hooks as enableShutdownHooks(): HTTP stops, workers stop claiming and drain, pools close.
    await app?.close();
  } catch (error) {
    logger.error(`closing the app failed: ${String(error)}`);
    exitCode = 1;
  }
  if (server?.source === 'embedded') await stopEmbedded(server);
  process.exit(exitCode);
}

async function stopEmbedded(server: PostgresServer): Promise<void> {
  await server.stop();
  logger.log('PostgreSQL stopped');
}

function postgresLog(message: string): void {
  for (const line of message.split('\n')) {
    // Our own stop ends sessions with an admin shutdown (a second Ctrl-C does not wait for the pools to close): expected.
    if (shuttingDown && !postgresVerbose && line.includes('terminating connection due to administrator command')) continue;
    if (line.trim() && (postgresVerbose || /\b(ERROR|FATAL|PANIC)\b/.test(line))) console.log(`[postgres] ${line}`);
  }
}

function envInt(name: string, fallback: number, min: number, max: number): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < min || value > max) {
    console.error(`${name} must be an integer from ${min} to ${max}, got "${text}"`);
    process.exit(2);
  }
  return value;
}
