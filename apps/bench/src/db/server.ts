import { startPostgres, type PostgresServer } from '@internal/pg-harness';
import type { PgChoice } from '../cli.js';
import { withClient } from './sql.js';
import { setStatementTracking } from './statements.js';

/** Settings the report states; everything not listed is PostgreSQL's default. */
export const REPORTED_SETTINGS = [
  'fsync', 'synchronous_commit', 'full_page_writes', 'wal_sync_method', 'wal_level', 'shared_buffers', 'work_mem',
  'max_wal_size', 'checkpoint_timeout', 'max_connections', 'autovacuum', 'jit', 'shared_preload_libraries',
  'pg_stat_statements.track',
];

/**
 * The benchmark's own PostgreSQL (the embedded npm build, 18, or the binaries --pg / --pg-bin name): durable (fsync, synchronous_commit and full_page_writes on,
 * as in production), defaults otherwise. pg_stat_statements is loaded but not tracking: tracking is switched
 * on only while idle traffic is counted (or for the whole run with --statements), so it costs the
 * throughput figures nothing.
 */
export async function startBenchServer(log: (message: string) => void, pg: PgChoice): Promise<PostgresServer> {
  // The harness falls back to PG_QUEUE_TEST_PG_BIN; the choice made on the command line (which read it already) wins.
  if (!pg.binDir) delete process.env.PG_QUEUE_TEST_PG_BIN;
  const server = await startPostgres({
    url: null,
    containers: false,
    durable: true,
    binDir: pg.binDir,
    settings: {
      shared_preload_libraries: 'pg_stat_statements',
      'pg_stat_statements.max': 10_000,
    },
    log: (m) => {
      // Errors only; a library probing for its own schema before creating it ("does not exist") is expected.
      if (/FATAL|PANIC|ERROR/.test(m) && !/does not exist/.test(m)) log(`[postgres] ${m}`);
    },
  });
  await withClient(server.url, (c) => c.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements'));
  // Through ALTER SYSTEM, not -c: a command-line setting would outrank the ALTER SYSTEM that switches it on later.
  await setStatementTracking(server.url, false);
  return server;
}

export interface ServerInfo {
  version: string;
  /** The major version (15, 18): it names the result files, so runs on two majors sit side by side. */
  major: number;
  settings: Record<string, string>;
}

export async function serverInfo(url: string): Promise<ServerInfo> {
  return withClient(url, async (c) => {
    const { v: version, n } = (await c.query<{ v: string; n: string }>(`SELECT version() AS v, current_setting('server_version_num') AS n`)).rows[0];
    const rows = (await c.query<{ name: string; setting: string; unit: string | null }>(
      'SELECT name, setting, unit FROM pg_settings WHERE name = ANY($1)',
      [REPORTED_SETTINGS],
    )).rows;
    const settings: Record<string, string> = {};
    for (const r of rows) settings[r.name] = formatSetting(r.setting, r.unit);
    return { version, major: Math.floor(Number(n) / 10_000), settings };
  });
}

function formatSetting(setting: string, unit: string | null): string {
  if (unit === '8kB') return `${(Number(setting) * 8) / 1024} MB`;
  if (unit === 'kB') return `${Number(setting) / 1024} MB`;
  if (unit === 'MB') return `${setting} MB`;
  if (unit === 's') return `${setting} s`;
  return setting;
}
