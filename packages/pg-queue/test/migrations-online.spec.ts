import { describe, expect, it } from '@jest/globals';
import { QueueService } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { sqlPool, startApp, waitFor } from './support/test-app.js';
import { INDEX_NAME_TAKEN } from '../src/pg-queue.messages.js';

const INDEX_MIGRATIONS = ['DelayedJobsIndex1764480000000', 'InFlightIndexByJob1764490000000', 'FinishedJobsIndex1764530000000'];

async function indexes(db: ReturnType<typeof sqlPool>): Promise<Record<string, string>> {
  const { rows } = await db.query(`
    SELECT c.relname AS name, CASE WHEN i.indisvalid THEN pg_get_indexdef(i.indexrelid) ELSE 'INVALID' END AS def
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = 'background_jobs'::regclass`);
  return Object.fromEntries(rows.map((r) => [r.name, r.def.replace(/^.* USING btree /, '')]));
}

describe('index migrations on a live table (issue 13 item 9)', () => {
  it('build their indexes without blocking writes or reads, and end with the indexes the queue needs', async () => {
    const url = await createTestDatabase('migonline');
    const db = sqlPool(url);
    const first = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    const id = await first.get(QueueService).enqueue('q', { v: 1 });
    await first.close();
    const expected = await indexes(db);
    // Back to the schema before the index migrations: the seed's run_at index, the first in-flight index.
    await db.query(`DROP INDEX background_jobs_delayed_idx, background_jobs_in_flight_idx, background_jobs_finished_idx`);
    await db.query(`CREATE INDEX background_jobs_run_at_idx ON background_jobs (queue_name, run_at) WHERE status = 'queued'`);
    await db.query(`CREATE INDEX background_jobs_in_flight_idx ON background_jobs (locked_by) WHERE status = 'processing'`);
    await db.query(`DELETE FROM migrations WHERE name = ANY($1)`, [INDEX_MIGRATIONS]);

    // A transaction that wrote to the table stays open: a plain CREATE INDEX queues for its lock and every
    // later insert queues behind it; a concurrent build lets them through while it waits.
    const open = await db.connect();
    await open.query('BEGIN');
    await open.query(`INSERT INTO background_jobs (queue_name) VALUES ('open')`);
    const booting = startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    await waitFor('the migration waiting', async () => {
      const { rows } = await db.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'CREATE INDEX%' AND wait_event_type = 'Lock'`);
      return rows[0].n > 0;
    });
    const writer = sqlPool(url);
    await writer.query(`SET statement_timeout = 2000`);
    await writer.query(`INSERT INTO background_jobs (queue_name) VALUES ('during')`);
    expect((await writer.query(`SELECT status::text FROM background_jobs WHERE id = $1`, [id])).rows).toEqual([{ status: 'queued' }]);
    await writer.end();
    await open.query('COMMIT');
    open.release();
    const app = await booting;
    expect(await indexes(db)).toEqual(expected);
    expect((await db.query(`SELECT name FROM migrations WHERE name = ANY($1) ORDER BY id`, [INDEX_MIGRATIONS])).rows.map((r) => r.name)).toEqual(INDEX_MIGRATIONS);
    await app.close();
    await db.end();
  });

  it('rebuilds an index that a crashed concurrent build left invalid', async () => {
    const url = await createTestDatabase('miginvalid');
    const db = sqlPool(url);
    const first = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    await first.close();
    // What a concurrent build killed half-way leaves: the index in the catalog, marked invalid.
    await db.query(`UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'background_jobs_finished_idx'::regclass`);
    await db.query(`DELETE FROM migrations WHERE name = 'FinishedJobsIndex1764530000000'`);
    expect((await indexes(db)).background_jobs_finished_idx).toBe('INVALID');
    const app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    expect((await indexes(db)).background_jobs_finished_idx).toBe('(status, finished_at) WHERE (finished_at IS NOT NULL)');
    await app.close();
    await db.end();
  });

  it('stops with a clear error when a table holds the name of an index it must create', async () => {
    const url = await createTestDatabase('migtaken');
    const db = sqlPool(url);
    const first = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    await first.close();
    await db.query(`DROP INDEX background_jobs_finished_idx`);
    await db.query(`CREATE TABLE background_jobs_finished_idx (x int)`);
    await db.query(`DELETE FROM migrations WHERE name = 'FinishedJobsIndex1764530000000'`);
    await expect(startApp(url, { queue: { workers: false, maintenance: { enabled: false } } })).rejects.toThrow(INDEX_NAME_TAKEN('background_jobs_finished_idx'));
    await db.end();
  });
});
