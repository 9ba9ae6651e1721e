import { describe, expect, it } from '@jest/globals';
import { DataSource } from 'typeorm';
import { PG_QUEUE_MIGRATIONS, QueueService } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { sqlPool, startApp } from './support/test-app.js';

describe('migrations', () => {
  it('ten instances booting at once migrate once', async () => {
    const url = await createTestDatabase('migrate10');
    const apps = await Promise.all(Array.from({ length: 10 }, () => startApp(url, { queue: { workers: false, maintenance: { enabled: false }, connection: { url, poolSize: 2 } } })));
    const db = sqlPool(url);
    const { rows } = await db.query(`SELECT name FROM migrations`);
    expect(rows).toEqual([{ name: 'CreateBackgroundJobs1764460000000' }, { name: 'CreateBackgroundQueues1764470000000' }, { name: 'DelayedJobsIndex1764480000000' }, { name: 'InFlightIndexByJob1764490000000' }, { name: 'FenceToken1764520000000' }]);
    await apps[0].get(QueueService).enqueue('q', {});
    await Promise.all(apps.map((a) => a.close()));
    await db.end();
  });

  it('runs from the app’s own DataSource, which the module then recognises, and reverts cleanly', async () => {
    const url = await createTestDatabase('migrateapp');
    const dataSource = new DataSource({ type: 'postgres', url, migrations: PG_QUEUE_MIGRATIONS });
    await dataSource.initialize();
    expect((await dataSource.runMigrations()).map((m) => m.name)).toEqual(['CreateBackgroundJobs1764460000000', 'CreateBackgroundQueues1764470000000', 'DelayedJobsIndex1764480000000', 'InFlightIndexByJob1764490000000', 'FenceToken1764520000000']);
    // The module's own runner finds nothing pending in the same migrations table.
    const app = await startApp(url, { queue: { dataSource, workers: false } });
    await app.get(QueueService).enqueue('q', {});
    await app.close();
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
