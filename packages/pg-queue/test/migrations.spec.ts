import { describe, expect, it } from '@jest/globals';
import { DataSource, type MigrationInterface, type QueryRunner } from 'typeorm';
import { PG_QUEUE_MIGRATIONS, QueueService } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { fork } from 'node:child_process';
import { runQueueMigrations } from '../src/connection/run-queue-migrations.js';
import { buildWorker } from './faults/support/build-worker.js';
import { sqlPool, startApp } from './support/test-app.js';

// Test migrations that leave a trace of every run, to count how often each one ran.
class CreateRunLog1900000000001 implements MigrationInterface {
  name = 'CreateRunLog1900000000001';
  async up(q: QueryRunner) {
    await q.query(`CREATE TABLE migration_runs (name text NOT NULL, in_transaction boolean NOT NULL)`);
    await q.query(`INSERT INTO migration_runs VALUES ('CreateRunLog', $1)`, [q.isTransactionActive]);
  }
  async down() {}
}
class OutsideTransaction1900000000002 implements MigrationInterface {
  name = 'OutsideTransaction1900000000002';
  transaction = false;
  async up(q: QueryRunner) {
    await q.query(`INSERT INTO migration_runs VALUES ('OutsideTransaction', $1)`, [q.isTransactionActive]);
  }
  async down() {}
}
class ConcurrentIndex1900000000003 implements MigrationInterface {
  name = 'ConcurrentIndex1900000000003';
  transaction = false;
  async up(q: QueryRunner) {
    // Fails inside a transaction block: proves the runner honours `transaction = false`.
    await q.query(`CREATE INDEX CONCURRENTLY IF NOT EXISTS migration_runs_name_idx ON migration_runs (name)`);
  }
  async down() {}
}

describe('migrations', () => {
  it('ten instances booting at once migrate once', async () => {
    const url = await createTestDatabase('migrate10');
    const apps = await Promise.all(Array.from({ length: 10 }, () => startApp(url, { queue: { workers: false, maintenance: { enabled: false }, connection: { url, poolSize: 2 } } })));
    const db = sqlPool(url);
    const { rows } = await db.query(`SELECT name FROM migrations ORDER BY id`);
    expect(rows).toEqual([{ name: 'CreateBackgroundJobs1764460000000' }, { name: 'CreateBackgroundQueues1764470000000' }, { name: 'DelayedJobsIndex1764480000000' }, { name: 'InFlightIndexByJob1764490000000' }, { name: 'FenceToken1764520000000' }, { name: 'FinishedJobsIndex1764530000000' }, { name: 'UniqueJobs1764540000000' }, { name: 'CreateBackgroundSchedules1764550000000' }, { name: 'Limits1764560000000' }, { name: 'JobResults1764570000000' }, { name: 'TraceContext1764580000000' }, { name: 'DeferredWakeUps1764590000000' }, { name: 'BufferedJobs1764600000000' }, { name: 'Flows1764610000000' }, { name: 'DurableSteps1764620000000' }, { name: 'AttemptHistory1764630000000' }, { name: 'SqlEnqueue1764640000000' }, { name: 'Instances1764650000000' }, { name: 'JobHistory1764660000000' }, { name: 'FlowOperatorActions1764671390000' }, { name: 'SqlEnqueueRunAt1764672000000' }, { name: 'RuntimeLimits1764680000000' }, { name: 'FairShare1764690000000' }, { name: 'LifoQueueAfter1764700000000' }, { name: 'JobLogs1764710000000' }, { name: 'RicherSchedules1764720000000' }, { name: 'JobEvents1764730000000' }, { name: 'EventOrder1764740000000' }, { name: 'NestedEventOrder1764750000000' }, { name: 'FlowSettleAfterSteps1764760000000' }, { name: 'HistoryReturnEvents1764770000000' }, { name: 'KeyPriorities1764780000000' }]);
    await apps[0].get(QueueService).enqueue('q', {});
    await Promise.all(apps.map((a) => a.close()));
    await db.end();
  });

  it('four OS processes booting at once migrate once', async () => {
    const url = await createTestDatabase('migrateprocs');
    const build = await buildWorker();
    const env: NodeJS.ProcessEnv = { ...process.env };
    delete env.NODE_OPTIONS; // Jest's --experimental-vm-modules is not for the children
    const children = Array.from({ length: 4 }, () => fork(build.script, [], { env, stdio: ['ignore', 'ignore', 'pipe', 'ipc'] }));
    try {
      const next = (child: (typeof children)[number]) =>
        new Promise<string>((resolve, reject) => {
          let stderr = '';
          child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
          child.once('message', (m: { type: string }) => resolve(m.type));
          child.once('exit', (code) => reject(new Error(`process exited (${code}): ${stderr}`)));
        });
      expect(await Promise.all(children.map(next))).toEqual(['loaded', 'loaded', 'loaded', 'loaded']);
      // Every process is loaded: start them in the same instant so their migration runs overlap.
      const ready = children.map(next);
      const config = { url, workerId: 'migrator', poolSize: 2, logLevels: ['error'], queue: { migrationsRun: true, workers: false, maintenance: { enabled: false } } };
      for (const child of children) child.send({ type: 'start', config });
      expect(await Promise.all(ready)).toEqual(['ready', 'ready', 'ready', 'ready']);
      const db = sqlPool(url);
      const { rows } = await db.query(`SELECT name, count(*)::int AS n FROM migrations GROUP BY name`);
      expect(rows.map((r) => r.name).sort()).toEqual(PG_QUEUE_MIGRATIONS.map((M) => new M().name).sort());
      expect(rows.filter((r) => r.n !== 1)).toEqual([]);
      await db.end();
    } finally {
      for (const child of children) child.kill('SIGKILL');
      await build.remove();
    }
  });

  it('runners racing on one-connection DataSources: each transactional migration runs once, a transaction = false one outside any transaction, all recorded once', async () => {
    const url = await createTestDatabase('migraterace');
    const dataSources = Array.from({ length: 6 }, () => new DataSource({ type: 'postgres', url, extra: { max: 1 } }));
    await Promise.all(dataSources.map((d) => d.initialize()));
    const all = [...PG_QUEUE_MIGRATIONS, CreateRunLog1900000000001, OutsideTransaction1900000000002];
    const applied = await Promise.all(dataSources.map((d) => runQueueMigrations(d, all)));
    expect(applied.flat().sort()).toEqual(all.map((M) => new M().name!).sort()); // each applied by exactly one runner
    const db = sqlPool(url);
    const { rows: recorded } = await db.query(`SELECT name, count(*)::int AS n FROM migrations GROUP BY name`);
    expect(recorded).toHaveLength(all.length);
    expect(recorded.filter((r) => r.n !== 1)).toEqual([]);
    const { rows: runs } = await db.query(`SELECT name, in_transaction, count(*)::int AS n FROM migration_runs GROUP BY 1, 2 ORDER BY 1`);
    expect(runs[0]).toEqual({ name: 'CreateRunLog', in_transaction: true, n: 1 });
    // A non-transactional migration runs under the session lock, re-checked: once too.
    expect(runs[1]).toEqual({ name: 'OutsideTransaction', in_transaction: false, n: 1 });
    expect(await runQueueMigrations(dataSources[0], [...all, ConcurrentIndex1900000000003])).toEqual(['ConcurrentIndex1900000000003']);
    const { rows: index } = await db.query(`SELECT indexname FROM pg_indexes WHERE indexname = 'migration_runs_name_idx'`);
    expect(index).toHaveLength(1);
    await Promise.all(dataSources.map((d) => d.destroy()));
    await db.end();
  });

  it('records in the DataSource’s own migrations table (migrationsTableName), which TypeORM then reads as up to date', async () => {
    const url = await createTestDatabase('migratetable');
    const dataSource = new DataSource({ type: 'postgres', url, migrations: PG_QUEUE_MIGRATIONS, migrationsTableName: 'app_migrations' });
    await dataSource.initialize();
    const app = await startApp(url, { queue: { dataSource, workers: false } });
    expect(await dataSource.showMigrations()).toBe(false); // nothing pending
    const rows = await dataSource.query(`SELECT timestamp, name FROM app_migrations ORDER BY id`);
    expect(rows[0]).toEqual({ timestamp: '1764460000000', name: 'CreateBackgroundJobs1764460000000' });
    expect(rows).toHaveLength(PG_QUEUE_MIGRATIONS.length);
    await app.close();
    await dataSource.destroy();
  });

  it('runs from the app’s own DataSource, which the module then recognises, and reverts cleanly', async () => {
    const url = await createTestDatabase('migrateapp');
    const dataSource = new DataSource({ type: 'postgres', url, migrations: PG_QUEUE_MIGRATIONS, migrationsTransactionMode: 'each' });
    await dataSource.initialize();
    expect((await dataSource.runMigrations()).map((m) => m.name)).toEqual(['CreateBackgroundJobs1764460000000', 'CreateBackgroundQueues1764470000000', 'DelayedJobsIndex1764480000000', 'InFlightIndexByJob1764490000000', 'FenceToken1764520000000', 'FinishedJobsIndex1764530000000', 'UniqueJobs1764540000000', 'CreateBackgroundSchedules1764550000000', 'Limits1764560000000', 'JobResults1764570000000', 'TraceContext1764580000000', 'DeferredWakeUps1764590000000', 'BufferedJobs1764600000000', 'Flows1764610000000', 'DurableSteps1764620000000', 'AttemptHistory1764630000000', 'SqlEnqueue1764640000000', 'Instances1764650000000', 'JobHistory1764660000000', 'FlowOperatorActions1764671390000', 'SqlEnqueueRunAt1764672000000', 'RuntimeLimits1764680000000', 'FairShare1764690000000', 'LifoQueueAfter1764700000000', 'JobLogs1764710000000', 'RicherSchedules1764720000000', 'JobEvents1764730000000', 'EventOrder1764740000000', 'NestedEventOrder1764750000000', 'FlowSettleAfterSteps1764760000000', 'HistoryReturnEvents1764770000000', 'KeyPriorities1764780000000']);
    // The module's own runner finds nothing pending in the same migrations table.
    const app = await startApp(url, { queue: { dataSource, workers: false } });
    await app.get(QueueService).enqueue('q', {});
    await app.close();
    expect(await dataSource.query(`SELECT prosrc LIKE '%compensation_failed%' AS reopens FROM pg_proc WHERE proname = 'pg_queue_flow_step'`)).toEqual([{ reopens: true }]);
    // Richer schedules (issue 43): an interval schedule is deleted, an ended cron schedule kept paused, the others as they were.
    await dataSource.query(
      `INSERT INTO background_schedules (name, queue_name, cron, every_ms, next_fire_at, fire_limit, fires, source) VALUES
         ('pulse', 'q', NULL, 60000, now(), NULL, 0, 'runtime'),
         ('done', 'q', '0 * * * *', NULL, NULL, 2, 2, 'runtime'),
         ('hourly', 'q', '0 * * * *', NULL, now() + interval '1 hour', NULL, 0, 'runtime')`,
    );
    // The event stream (issue 43): a recording queue's triggers go with the table, the functions and the column.
    await dataSource.query(`SELECT pg_queue_record_events('q', true)`);
    // Key priorities (KeyPriorities1764780000000): its down drops the index of keyed jobs of another priority than 0.
    expect(await dataSource.query(`SELECT to_regclass('background_jobs_key_priority_idx') IS NOT NULL AS i`)).toEqual([{ i: true }]);
    await dataSource.undoLastMigration();
    expect(await dataSource.query(`SELECT to_regclass('background_jobs_key_priority_idx') AS i`)).toEqual([{ i: null }]);
    // History return events (HistoryReturnEvents1764770000000): its down puts the event function back without the skip.
    const fromHistory = async () => (await dataSource.query(`SELECT prosrc LIKE '%NEW.status IN (''completed'', ''failed'', ''cancelled'')%' AS set FROM pg_proc WHERE proname = 'background_job_events_record'`))[0].set;
    expect(await fromHistory()).toBe(true);
    await dataSource.undoLastMigration();
    expect(await fromHistory()).toBe(false);
    // Flow settle after steps (FlowSettleAfterSteps1764760000000): its down drops pg_queue_flow_advance; pg_queue_flow_step stays.
    const flowFunctions = async () => (await dataSource.query(`SELECT proname FROM pg_proc WHERE proname IN ('pg_queue_flow_advance', 'pg_queue_flow_step') ORDER BY proname`)).map((r: { proname: string }) => r.proname);
    expect(await flowFunctions()).toEqual(['pg_queue_flow_advance', 'pg_queue_flow_step']);
    await dataSource.undoLastMigration();
    expect(await flowFunctions()).toEqual(['pg_queue_flow_step']);
    // Nested event order (NestedEventOrder1764750000000): its down puts the function back as EventOrder made it.
    const nested = async () => (await dataSource.query(`SELECT prosrc LIKE '%cmin%' AS set FROM pg_proc WHERE proname = 'background_job_events_record'`))[0].set;
    expect(await nested()).toBe(true);
    await dataSource.undoLastMigration();
    expect(await nested()).toBe(false);
    // Event order (EventOrder1764740000000): its down puts the functions back as JobEvents made them (tx its default).
    const eventTx = async () => (await dataSource.query(`SELECT prosrc LIKE '%event_tx%' AS set FROM pg_proc WHERE proname = 'background_job_events_record'`))[0].set;
    expect(await eventTx()).toBe(true);
    await dataSource.undoLastMigration();
    expect(await eventTx()).toBe(false);
    await dataSource.undoLastMigration();
    expect(await dataSource.query(`SELECT to_regclass('background_job_events') AS t, (SELECT count(*)::int FROM pg_trigger WHERE tgname LIKE '%events%') AS triggers, (SELECT count(*)::int FROM pg_proc WHERE proname IN ('pg_queue_record_events', 'background_job_events_record', 'background_flow_events_record')) AS functions`)).toEqual([{ t: null, triggers: 0, functions: 0 }]);
    expect(await dataSource.query(`SELECT count(*)::int AS n FROM information_schema.columns WHERE table_name = 'background_queues' AND column_name = 'record_events'`)).toEqual([{ n: 0 }]);
    await dataSource.undoLastMigration();
    expect(await dataSource.query(`SELECT name, paused, next_fire_at IS NOT NULL AS has_next FROM background_schedules ORDER BY name`)).toEqual([
      { name: 'done', paused: true, has_next: true },
      { name: 'hourly', paused: false, has_next: true },
    ]);
    expect(await dataSource.query(`SELECT count(*)::int AS n FROM information_schema.columns WHERE table_name = 'background_schedules' AND column_name IN ('every_ms', 'fire_limit', 'fires', 'start_at', 'end_at')`)).toEqual([{ n: 0 }]);
    await dataSource.undoLastMigration(); // job logs: the column of both tables, and the view made again without it
    expect(await dataSource.query(`SELECT count(*)::int AS n FROM information_schema.columns WHERE table_name IN ('background_jobs', 'background_jobs_history', 'background_jobs_all') AND column_name = 'logs'`)).toEqual([{ n: 0 }]);
    expect(await dataSource.query(`SELECT to_regclass('background_jobs_all') IS NOT NULL AS v`)).toEqual([{ v: true }]);
    await dataSource.undoLastMigration(); // LIFO and queue-after: the column, the table, the indexes; the SQL functions as before
    expect(await dataSource.query(`SELECT to_regclass('background_job_successors') AS t, to_regclass('background_jobs_lifo_idx') AS i`)).toEqual([{ t: null, i: null }]);
    expect(await dataSource.query(`SELECT count(*)::int AS n FROM information_schema.columns WHERE table_name IN ('background_jobs', 'background_jobs_history') AND column_name = 'lifo'`)).toEqual([{ n: 0 }]);
    expect(await dataSource.query(`SELECT pg_queue_enqueue('after-revert', '{}') > 0 AS ok`)).toEqual([{ ok: true }]);
    await dataSource.undoLastMigration(); // fair share: its tables and the clock column
    expect(await dataSource.query(`SELECT to_regclass('background_queue_weights') AS w, to_regclass('background_fair_passes') AS p`)).toEqual([{ w: null, p: null }]);
    expect(await dataSource.query(`SELECT count(*)::int AS n FROM information_schema.columns WHERE table_name = 'background_queues' AND column_name = 'fair_clock'`)).toEqual([{ n: 0 }]);
    await dataSource.undoLastMigration(); // runtime limits: the override and block columns and the key blocks' table
    expect(await dataSource.query(`SELECT count(*)::int AS n FROM information_schema.columns WHERE table_name = 'background_queues' AND column_name IN ('limits', 'blocked_until', 'rate_backoff_ms', 'key_blocked_until')`)).toEqual([{ n: 0 }]);
    expect(await dataSource.query(`SELECT to_regclass('background_queue_key_blocks') AS t`)).toEqual([{ t: null }]);
    await dataSource.undoLastMigration(); // a run_at that does not exist: the function as SqlEnqueue made it (22008 again)
    await expect(dataSource.query(`SELECT * FROM pg_queue_enqueue_many('[{"queue": "q", "payload": 1, "run_at": "2026-02-30T08:00:00Z"}]')`)).rejects.toMatchObject({ code: '22008' });
    await dataSource.undoLastMigration(); // flow operator actions: pg_queue_flow_step as the Flows migration made it
    expect(await dataSource.query(`SELECT prosrc LIKE '%compensation_failed%' AS reopens FROM pg_proc WHERE proname = 'pg_queue_flow_step'`)).toEqual([{ reopens: false }]);
    await dataSource.undoLastMigration(); // partitioned history: its table and view
    expect(await dataSource.query(`SELECT to_regclass('background_jobs_history') AS t, to_regclass('background_jobs_all') AS v`)).toEqual([{ t: null, v: null }]);
    await dataSource.undoLastMigration(); // instances: its table
    expect(await dataSource.query(`SELECT to_regclass('background_instances') AS t`)).toEqual([{ t: null }]);
    await dataSource.undoLastMigration(); // enqueue from SQL: its functions
    expect(await dataSource.query(`SELECT count(*)::int AS n FROM pg_proc WHERE proname LIKE 'pg_queue_enqueue%'`)).toEqual([{ n: 0 }]);
    await dataSource.undoLastMigration(); // attempt history: its table
    expect(await dataSource.query(`SELECT to_regclass('background_job_attempts') AS t`)).toEqual([{ t: null }]);
    await dataSource.undoLastMigration(); // durable steps: its column
    expect(await dataSource.query(`SELECT count(*)::int AS n FROM information_schema.columns WHERE table_name = 'background_jobs' AND column_name = 'steps'`)).toEqual([{ n: 0 }]);
    await dataSource.undoLastMigration(); // flows: the trigger, the functions, the tables and the columns
    const flows = await dataSource.query(`
      SELECT (SELECT count(*)::int FROM information_schema.columns WHERE table_name = 'background_jobs' AND column_name IN ('flow_id', 'flow_ref', 'compensate', 'compensates')) AS columns,
             to_regclass('background_flows') IS NULL AND to_regclass('background_job_deps') IS NULL AS tables_gone,
             (SELECT count(*)::int FROM pg_proc WHERE proname LIKE 'pg_queue_flow%') AS functions`);
    expect(flows).toEqual([{ columns: 0, tables_gone: true, functions: 0 }]);
    await dataSource.undoLastMigration(); // buffered jobs: its column
    expect(await dataSource.query(`SELECT count(*)::int AS n FROM information_schema.columns WHERE table_name = 'background_jobs' AND column_name = 'buffered'`)).toEqual([{ n: 0 }]);
    await dataSource.undoLastMigration(); // deferred wake-ups: the trigger function as it was
    expect(await dataSource.query(`SELECT prosrc LIKE '%pg_queue.wake%' AS defers FROM pg_proc WHERE proname = 'background_jobs_notify'`)).toEqual([{ defers: false }]);
    await dataSource.undoLastMigration(); // trace context: its column
    expect(await dataSource.query(`SELECT count(*)::int AS n FROM information_schema.columns WHERE table_name = 'background_jobs' AND column_name = 'trace_context'`)).toEqual([{ n: 0 }]);
    await dataSource.undoLastMigration(); // job results: result, progress, awaited
    const results = await dataSource.query(
      `SELECT count(*)::int AS columns FROM information_schema.columns WHERE table_name = 'background_jobs' AND column_name IN ('result', 'progress', 'awaited')`,
    );
    expect(results).toEqual([{ columns: 0 }]);
    await dataSource.undoLastMigration(); // limits: columns, indexes and the rate-limit window table
    const limits = await dataSource.query(
      `SELECT (SELECT count(*)::int FROM information_schema.columns WHERE table_name = 'background_jobs' AND column_name IN ('concurrency_key', 'limited')) AS columns,
              to_regclass('background_queue_starts') IS NULL AS table_gone`,
    );
    expect(limits).toEqual([{ columns: 0, table_gone: true }]);
    await dataSource.undoLastMigration(); // the schedules table
    await dataSource.undoLastMigration(); // unique jobs: the key column, its index, the windows table
    const unique = await dataSource.query(`
      SELECT (SELECT count(*)::int FROM information_schema.columns WHERE table_name = 'background_jobs' AND column_name = 'unique_key') AS columns,
             (SELECT count(*)::int FROM pg_class WHERE relname LIKE 'background_job_keys%' OR relname = 'background_jobs_unique_key_idx') AS relations`);
    expect(unique).toEqual([{ columns: 0, relations: 0 }]);
    await dataSource.undoLastMigration(); // the finished-jobs index
    await dataSource.undoLastMigration(); // the fence token
    const columns = await dataSource.query(`SELECT count(*)::int AS n FROM information_schema.columns WHERE table_name = 'background_jobs' AND column_name = 'fence_token'`);
    expect(columns).toEqual([{ n: 0 }]);
    await dataSource.undoLastMigration();
    await dataSource.undoLastMigration();
    // After the index migrations' down(): the seed's run_at index is back, the delayed-jobs index gone.
    const indexes = await dataSource.query(`SELECT indexname FROM pg_indexes WHERE tablename = 'background_jobs' ORDER BY 1`);
    expect(indexes.map((r: { indexname: string }) => r.indexname)).toEqual([
      'background_jobs_claim_idx',
      'background_jobs_in_flight_idx',
      'background_jobs_pkey',
      'background_jobs_run_at_idx',
    ]);
    await dataSource.undoLastMigration();
    await dataSource.undoLastMigration();
    const left = await dataSource.query(`
      SELECT (SELECT count(*)::int FROM pg_class WHERE relname LIKE 'background_jobs%') AS relations,
             (SELECT count(*)::int FROM pg_type WHERE typname = 'background_job_status') AS types,
             (SELECT count(*)::int FROM pg_proc WHERE proname = 'background_jobs_notify') AS functions,
             (SELECT count(*)::int FROM pg_class WHERE relname LIKE 'background_queues%') AS queue_tables`);
    expect(left).toEqual([{ relations: 0, types: 0, functions: 0, queue_tables: 0 }]);
    await dataSource.destroy();
  });

  it('sets the per-table autovacuum settings', async () => {
    const url = await createTestDatabase('autovac');
    const app = await startApp(url, { queue: { workers: false } });
    const db = sqlPool(url);
    const { rows } = await db.query(`SELECT reloptions FROM pg_class WHERE relname = 'background_jobs'`);
    expect(rows[0].reloptions).toEqual(expect.arrayContaining(['autovacuum_vacuum_scale_factor=0.01', 'autovacuum_vacuum_cost_delay=0']));
    await app.close();
    await db.end();
  });
});
