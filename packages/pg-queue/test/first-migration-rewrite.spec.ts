import { afterAll, describe, expect, it } from '@jest/globals';
import { DataSource } from 'typeorm';
import { CreateBackgroundJobs1764460000000, PG_QUEUE_MIGRATIONS } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { runQueueMigrations } from '../src/connection/run-queue-migrations.js';
import { ReleasedCreateBackgroundJobs1764460000000 } from './fixtures/released/create-background-jobs.js';
import { schemaDump } from './support/schema-dump.js';
import { createSeedTable } from './support/seed-schema.js';
import { sqlPool } from './support/test-app.js';

/** Every migration as the last release shipped them: the first one as it was before issue 18 item 7. */
const RELEASED = [ReleasedCreateBackgroundJobs1764460000000, ...PG_QUEUE_MIGRATIONS.filter((M) => M !== CreateBackgroundJobs1764460000000)];

const opened: DataSource[] = [];
async function migrated(label: string, migrations: NonNullable<Parameters<typeof runQueueMigrations>[1]>, seedRows?: number) {
  const url = await createTestDatabase(label);
  const db = sqlPool(url);
  if (seedRows !== undefined) await createSeedTable(db, seedRows);
  const dataSource = new DataSource({ type: 'postgres', url, extra: { max: 1 } });
  await dataSource.initialize();
  opened.push(dataSource);
  await runQueueMigrations(dataSource, migrations);
  return { db, schema: await schemaDump(db) };
}

// The first migration now runs outside a transaction (short steps, a batched backfill, the claim index built
// CONCURRENTLY, no duplicate of the seed's index). A database migrated by the released version must be in the
// same schema as one migrated now, whether the first migration created the table or adopted the seed's.
describe('the rewritten first migration ends where the released one did (issue 18 item 7)', () => {
  afterAll(async () => {
    await Promise.all(opened.splice(0).map((d) => d.destroy()));
  });

  it('on a new database: the same schema after all the migrations', async () => {
    const released = await migrated('rewrite-new-old', RELEASED);
    const now = await migrated('rewrite-new-now', PG_QUEUE_MIGRATIONS);
    expect(now.schema).toEqual(released.schema);
    expect(now.schema.indexes.length).toBeGreaterThan(10);
    await Promise.all([released.db.end(), now.db.end()]);
  });

  it('on an adopted seed table: the same schema, and the same finish times and leases on the seed’s rows', async () => {
    const released = await migrated('rewrite-seed-old', RELEASED, 20_000);
    const now = await migrated('rewrite-seed-now', PG_QUEUE_MIGRATIONS, 20_000);
    expect(now.schema).toEqual(released.schema);
    // The two seed tables were loaded a few seconds apart: times are compared to the row's own updated_at.
    const rows = `
      SELECT id, status::text, finished_at IS NULL AS unfinished, finished_at = updated_at AS finished_when_updated,
             lease_expires_at IS NOT NULL AS leased
      FROM background_jobs ORDER BY id`;
    const [before, after] = [(await released.db.query(rows)).rows, (await now.db.query(rows)).rows];
    expect(after).toHaveLength(20_000);
    expect(after).toEqual(before);
    await Promise.all([released.db.end(), now.db.end()]);
  });

  it('adopting a seed table builds no second copy of the seed’s index', async () => {
    const url = await createTestDatabase('rewrite-seed-first');
    const db = sqlPool(url);
    await createSeedTable(db, 1_000);
    const dataSource = new DataSource({ type: 'postgres', url, extra: { max: 1 } });
    await dataSource.initialize();
    opened.push(dataSource);
    await runQueueMigrations(dataSource, [CreateBackgroundJobs1764460000000]);
    const { rows } = await db.query(`SELECT indexname FROM pg_indexes WHERE tablename = 'background_jobs' ORDER BY 1`);
    expect(rows.map((r) => r.indexname)).toEqual(['background_jobs_claim_idx', 'background_jobs_pkey', 'idx_background_jobs_pending']);
    await db.end();
  });
});
