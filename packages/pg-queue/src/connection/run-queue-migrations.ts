import { Logger } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { PG_QUEUE_MIGRATIONS } from '../migrations/index.js';
import { SQL } from '../store/job.sql.js';

/**
 * Runs the queue's own migrations (and only those) at start-up. Ten instances booting at once take a
 * session advisory lock in turn: the first migrates, the others then find nothing pending. Each migration runs
 * in its own transaction, except those declared `transaction = false` (concurrent index builds).
 *
 * A short-lived DataSource with the app's connection settings and only our migrations keeps the app's own
 * migrations out of it; it records them in the app's migrations table, so an app that lists
 * PG_QUEUE_MIGRATIONS in its own DataSource and this runner agree on what already ran.
 */
export async function runQueueMigrations(appDataSource: DataSource): Promise<string[]> {
  const logger = new Logger('PgQueue');
  const runner = new DataSource({
    ...appDataSource.options,
    entities: [],
    subscribers: [],
    migrations: PG_QUEUE_MIGRATIONS,
    migrationsRun: false,
    synchronize: false,
    dropSchema: false,
    logging: false,
    poolSize: 2,
  } as typeof appDataSource.options);
  await runner.initialize();
  const lock = runner.createQueryRunner();
  try {
    await lock.connect();
    // Polled, not waited for: a backend waiting on the lock holds a snapshot, and CREATE INDEX CONCURRENTLY
    // (run by the lock holder) waits for every older snapshot to end, which would never happen.
    while (!(await lock.query(SQL.advisoryTryLock))[0].locked) await new Promise((resolve) => setTimeout(resolve, 100));
    try {
      const ran = await runner.runMigrations({ transaction: 'each' });
      if (ran.length > 0) logger.log(`applied queue migrations: ${ran.map((m) => m.name).join(', ')}`);
      return ran.map((m) => m.name);
    } finally {
      await lock.query(SQL.advisoryUnlock);
    }
  } finally {
    await lock.release();
    await runner.destroy();
  }
}
