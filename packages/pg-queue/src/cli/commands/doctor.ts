import type { Command } from 'commander';
import { randomBytes } from 'node:crypto';
import type { Connection } from '../connection.js';
import { formatDuration, parseDuration } from '../duration.js';
import { CANNOT_CONNECT } from '../cli.messages.js';
import { CliError, describeError } from '../errors.js';
import { print, printJson } from '../output.js';
import type { Run } from '../run.js';
import { unservedQueues } from '../../store/instance.store.js';
import { progress } from './doctor-progress.js';
import type { CheckResult } from './check-result.js';

export type { CheckResult, CheckState } from './check-result.js';


interface DoctorOptions {
  json?: boolean;
  sweepInterval: number;
  migrationsTable?: string;
}

/** Every index the queue's migrations create (a missing one is a migration that did not run, or was undone by hand). */
const EXPECTED_INDEXES = [
  'background_jobs_pkey',
  'background_jobs_claim_idx',
  'background_jobs_delayed_idx',
  'background_jobs_in_flight_idx',
  'background_jobs_finished_idx',
  'background_jobs_unique_key_idx',
  'background_job_keys_pkey',
  'background_job_keys_held_until_idx',
  'background_queues_pkey',
  'background_schedules_pkey',
  'background_schedules_due_idx',
  'background_jobs_limited_idx',
  'background_jobs_key_claim_idx',
  'background_queue_starts_idx',
];

/** The indexes of a later migration, expected once that migration is applied (a pending one is the schema check's to report). */
const MIGRATION_INDEXES: Record<string, readonly string[]> = {
  Flows1764610000000: [
    'background_jobs_flow_idx',
    'background_jobs_flow_status_idx',
    'background_flows_pkey',
    'background_flows_open_idx',
    'background_flows_finished_idx',
    'background_job_deps_pkey',
    'background_job_deps_child_idx',
    'background_job_deps_open_idx',
    'background_job_deps_flow_idx',
  ],
  AttemptHistory1764630000000: ['background_job_attempts_pkey', 'background_job_attempts_job_idx'],
  Instances1764650000000: ['background_instances_pkey'],
  JobHistory1764660000000: ['background_jobs_history_id_idx', 'background_jobs_history_finished_idx', 'background_jobs_history_flow_idx'],
  KeyPriorities1764780000000: ['background_jobs_key_priority_idx'],
};

/** What the first migration sets on background_jobs: a queue table turns over fast and needs vacuuming often. */
const AUTOVACUUM_SETTINGS = ['autovacuum_vacuum_scale_factor', 'autovacuum_vacuum_threshold', 'autovacuum_analyze_scale_factor'];

const LISTEN_TIMEOUT_MS = 3_000;
const STUCK_COUNT_LIMIT = 1_000;

export function registerDoctor(program: Command, run: Run): void {
  program
    .command('doctor')
    .description('check the database: schema version, indexes, autovacuum settings, stuck leases, instances, progress (unserved or unclaimed due jobs), LISTEN, transaction pooler; exit 1 if a check fails')
    .option('--sweep-interval <duration>', "the module's maintenance.sweepIntervalMs, if your app changes it (default 5s)", parseDuration('--sweep-interval'), 5_000)
    .option('--migrations-table <name>', "TypeORM's migrations table, if your DataSource names it (default: migrations)")
    .option('--json', 'as JSON: [{ check, state, detail, hint? }]')
    .action(
      run(async (connection, _args, options: DoctorOptions) => {
        // Every check connects: without this one first, a wrong password or a dead server was reported six times.
        const unreachable = await connects(connection);
        const results: CheckResult[] = unreachable ? [unreachable] : [];
        const checks = unreachable ? {} : { schema, indexes, autovacuum, leases: stuckLeases, instances, progress, listen, pooler };
        for (const [name, check] of Object.entries(checks)) {
          try {
            results.push(await check(connection, options));
          } catch (error) {
            // One check that cannot run (a missing table, a refused statement) does not stop the others.
            results.push({ check: name, state: 'fail', detail: `the check failed: ${connection.mask(firstLine(error))}` });
          }
        }
        if (options.json) printJson(results);
        else for (const r of results) print(`${r.state.padEnd(4)}  ${r.check.padEnd(11)}  ${r.detail}${r.hint ? `\n${' '.repeat(19)}hint: ${r.hint}` : ''}`);
        if (unreachable) throw new CliError(CANNOT_CONNECT());
        const failed = results.filter((r) => r.state === 'fail').length;
        if (failed > 0) throw new CliError(`${failed} check(s) failed`);
      }),
    );
}

/** Undefined when a connection answers; else the one result doctor reports (the other checks would each fail the same way). */
async function connects(connection: Connection): Promise<CheckResult | undefined> {
  try {
    await connection.getPool().query('SELECT 1');
    return undefined;
  } catch (error) {
    return {
      check: 'connection',
      state: 'fail',
      detail: connection.mask(describeError(connection.explain(error))),
      hint: 'check the URL (host, port, database, user) and the password (DATABASE_URL, PGPASSWORD or ~/.pgpass)',
    };
  }
}

async function schema(connection: Connection, options: DoctorOptions): Promise<CheckResult> {
  const { migrationStatus } = await import('../migrations.js');
  const { rows, pending } = await migrationStatus(connection, options.migrationsTable);
  const applied = rows.length - pending;
  if (applied === 0) return { check: 'schema', state: 'fail', detail: 'no queue migration applied', hint: 'run `pg-queue migrate`, or boot the app once (migrationsRun defaults to true)' };
  if (pending > 0) {
    const names = rows.filter((r) => !r.applied).map((r) => r.name);
    return { check: 'schema', state: 'warn', detail: `${applied} of ${rows.length} queue migrations applied; pending: ${names.join(', ')}`, hint: 'run `pg-queue migrate` (this version of the package expects them)' };
  }
  return { check: 'schema', state: 'ok', detail: `all ${rows.length} queue migrations applied (latest ${rows.at(-1)!.name})` };
}

async function indexes(connection: Connection, options: DoctorOptions): Promise<CheckResult> {
  const found = new Map((await connection.adminStore().queueIndexes()).map((i) => [i.name, i.valid]));
  const { migrationStatus } = await import('../migrations.js');
  const applied = new Set((await migrationStatus(connection, options.migrationsTable)).rows.filter((r) => r.applied).map((r) => r.name));
  const expected = [...EXPECTED_INDEXES, ...Object.entries(MIGRATION_INDEXES).flatMap(([migration, names]) => (applied.has(migration) ? names : []))];
  const missing = expected.filter((name) => !found.has(name));
  const invalid = [...found].filter(([, valid]) => !valid).map(([name]) => name);
  if (invalid.length > 0) {
    return {
      check: 'indexes',
      state: 'fail',
      detail: `INVALID (a concurrent build that failed): ${invalid.join(', ')}${missing.length ? `; missing: ${missing.join(', ')}` : ''}`,
      hint: 'DROP INDEX CONCURRENTLY each invalid index, then `pg-queue migrate down` and `pg-queue migrate` for the migration that builds it (or boot the app: the runner rebuilds invalid ones)',
    };
  }
  if (missing.length > 0) return { check: 'indexes', state: 'fail', detail: `missing: ${missing.join(', ')}`, hint: 'run `pg-queue migrate`; if the schema says up to date, an index was dropped by hand: `pg-queue migrate down` then `pg-queue migrate` rebuilds the last one' };
  return { check: 'indexes', state: 'ok', detail: `${expected.length} indexes present and valid` };
}

async function autovacuum(connection: Connection): Promise<CheckResult> {
  const options = await connection.adminStore().jobsTableOptions();
  if (options === null) return { check: 'autovacuum', state: 'fail', detail: 'table background_jobs does not exist', hint: 'run `pg-queue migrate`' };
  const set = new Map(options.map((o) => o.split('=') as [string, string]));
  const missing = AUTOVACUUM_SETTINGS.filter((name) => !set.has(name));
  const detail = AUTOVACUUM_SETTINGS.filter((name) => set.has(name)).map((name) => `${name}=${set.get(name)}`).join(', ');
  if (set.get('autovacuum_enabled') === 'false') return { check: 'autovacuum', state: 'fail', detail: 'autovacuum_enabled=false on background_jobs', hint: 'ALTER TABLE background_jobs RESET (autovacuum_enabled): dead rows of finished jobs pile up and slow every claim' };
  if (missing.length > 0) {
    return {
      check: 'autovacuum',
      state: 'warn',
      detail: `background_jobs lacks ${missing.join(', ')}${detail ? ` (has ${detail})` : ''}: the server's defaults (vacuum at 20% dead rows) are too lazy for a queue table`,
      hint: 'ALTER TABLE background_jobs SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000, autovacuum_analyze_scale_factor = 0.02)',
    };
  }
  return { check: 'autovacuum', state: 'ok', detail };
}

async function stuckLeases(connection: Connection, options: DoctorOptions): Promise<CheckResult> {
  // Two sweeps of grace: the sweeper runs every interval, so a lease that ended longer ago than that was missed.
  const graceMs = 2 * options.sweepInterval;
  const { n, buffered, oldest } = await connection.adminStore().stuckLeases(graceMs, STUCK_COUNT_LIMIT);
  if (n === 0) return { check: 'leases', state: 'ok', detail: `no running or read-ahead job whose lease ended more than ${formatDuration(graceMs)} ago` };
  // A buffered job (in a worker's read-ahead buffer) never started: it is waiting, not running.
  const what = buffered === 0 ? 'running job(s)' : buffered === n ? 'read-ahead job(s), never started,' : `job(s) (${n - buffered} running, ${buffered} read ahead and never started)`;
  return {
    check: 'leases',
    state: 'warn',
    detail: `${n === STUCK_COUNT_LIMIT ? 'at least ' : ''}${n} ${what} whose lease ended more than ${formatDuration(graceMs)} ago (oldest ${oldest?.toISOString()})`,
    hint: 'no instance runs the sweeper: keep maintenance enabled on at least one instance (maintenance.enabled), or check that instances are up',
  };
}

/** The instances registry: who runs workers now, and queues with queued jobs that no live instance serves. */
async function instances(connection: Connection): Promise<CheckResult> {
  const store = connection.jobStore();
  let list;
  try {
    list = await store.instances.list();
  } catch (error) {
    // A pending migration is the schema check's to report (and fail); here it only means there is nothing to read.
    if ((error as { code?: unknown }).code !== '42P01') throw error;
    return { check: 'instances', state: 'warn', detail: 'table background_instances does not exist (its migration is pending)', hint: 'run `pg-queue migrate`' };
  }
  const stats = await store.countByStatus();
  const unserved = unservedQueues(Object.keys(stats).filter((q) => stats[q].queued > 0).sort(), list);
  const live = list.filter((i) => i.live);
  const gone = list.length - live.length;
  const detail = `${live.length} live instance(s) run workers${gone > 0 ? `, ${gone} gone within the last hour (stopped writing their row without a clean stop)` : ''}`;
  if (unserved.length === 0) return { check: 'instances', state: 'ok', detail };
  return {
    check: 'instances',
    state: 'warn',
    detail: `${detail}; nobody runs ${unserved.join(', ')} (queued jobs, no live instance with a handler for the queue)`,
    hint: 'deploy or start an instance whose app has a @JobHandler for the queue (with workers enabled), or check `pg-queue instances`',
  };
}

/** LISTEN on a connection of its own, NOTIFY from another: the round trip the workers' wake-ups depend on. */
async function listen(connection: Connection): Promise<CheckResult> {
  const channel = `pg_queue_doctor_${randomBytes(4).toString('hex')}`;
  const listener = connection.client();
  listener.on('error', () => undefined);
  try {
    await listener.connect();
    const heard = new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), LISTEN_TIMEOUT_MS);
      listener.on('notification', (n) => {
        if (n.channel !== channel) return;
        clearTimeout(timer);
        resolve(true);
      });
    });
    await listener.query(`LISTEN ${channel}`);
    const started = Date.now();
    await connection.getPool().query(`SELECT pg_notify($1, 'ping')`, [channel]);
    if (await heard) return { check: 'listen', state: 'ok', detail: `LISTEN/NOTIFY round trip in ${Date.now() - started} ms` };
    return {
      check: 'listen',
      state: 'fail',
      detail: `a NOTIFY was not heard within ${LISTEN_TIMEOUT_MS / 1000} s`,
      hint: connection.transactionPooler
        ? 'through a transaction pooler LISTEN hears nothing: give the module listenerUrl, a direct PostgreSQL URL, and run doctor on that URL too'
        : 'a proxy in between drops notifications? workers then only poll (fallbackPollIntervalMs); set listenerUrl to a direct PostgreSQL URL',
    };
  } finally {
    await listener.end().catch(() => undefined);
  }
}

/**
 * A pooler that shares server connections between clients (PgBouncer in transaction or statement mode) shows
 * as one server process (pg_backend_pid) answering two clients, or a client's process changing between
 * statements. PgBouncer hands out the server connection used last, so two clients in turn normally get the
 * same one; a pooler configured otherwise may go unnoticed (the check then says so).
 */
async function pooler(connection: Connection): Promise<CheckResult> {
  const pool = connection.getPool();
  const { AdminStore } = await import('../../store/admin.store.js');
  const a = await pool.connect();
  let shared: boolean;
  try {
    const first = await new AdminStore(a).backendPid();
    const b = await pool.connect();
    try {
      const other = await new AdminStore(b).backendPid();
      const again = await new AdminStore(a).backendPid();
      shared = first === other || first !== again;
    } finally {
      b.release();
    }
  } finally {
    a.release();
  }
  if (!shared) {
    return connection.transactionPooler
      ? { check: 'pooler', state: 'ok', detail: 'no transaction pooler detected (--transaction-pooler was given: unneeded on a direct connection, harmless)' }
      : { check: 'pooler', state: 'ok', detail: 'no transaction pooler detected: each client has its own server session' };
  }
  if (connection.transactionPooler) return { check: 'pooler', state: 'ok', detail: 'transaction pooler detected (server sessions shared between clients), and --transaction-pooler is set' };
  return {
    check: 'pooler',
    state: 'warn',
    detail: 'transaction pooler detected: server sessions are shared between clients (PgBouncer in transaction mode?)',
    hint: 'set transactionPooler: true and listenerUrl (a direct URL) in the PgQueueModule options, and pass --transaction-pooler here',
  };
}

function firstLine(error: unknown): string {
  return error instanceof Error ? (error.message || error.name).split('\n')[0] : String(error);
}
