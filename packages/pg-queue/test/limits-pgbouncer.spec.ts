import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplicationContext } from '@nestjs/common';
import pg from 'pg';
import { QueueService } from 'nestjs-pg-queue';
import { JobStore } from '../src/internal.js';
import { createTestDatabase, pgBouncerAvailable, startPgBouncer, withDatabaseName, type PgBouncer } from '@internal/pg-harness';
import { sqlPool, startApp } from './support/test-app.js';

// The claim of a limited queue is a transaction (BEGIN with the queue's advisory lock, the claim, COMMIT):
// through PgBouncer in transaction mode it must keep one server connection for the three round trips, and
// the transaction-scoped lock must still serialise the claimers.
const available = pgBouncerAvailable();
if (!available) console.warn('limits-pgbouncer.spec.ts skipped: /usr/sbin/pgbouncer is not installed (apt-get install pgbouncer)');
const describeWithBouncer = available ? describe : describe.skip;

describeWithBouncer('limits through PgBouncer in transaction mode', () => {
  let bouncer: PgBouncer;
  let app: INestApplicationContext;
  let db: pg.Pool;
  let bouncedUrl: string;

  beforeAll(async () => {
    const directUrl = await createTestDatabase('limbouncer');
    db = sqlPool(directUrl);
    app = await startApp(directUrl, { queue: { workers: false, maintenance: { enabled: false } } });
    bouncer = await startPgBouncer(process.env.PG_QUEUE_TEST_SERVER_URL!, { poolMode: 'transaction', poolSize: 4 });
    bouncedUrl = withDatabaseName(bouncer.url, new URL(directUrl).pathname.slice(1));
  });
  afterAll(async () => {
    await app?.close();
    await db?.end();
    await bouncer?.stop();
  });

  it('twelve claimers over four server connections: 3 jobs of a queue limited to 3; one job per key of a queue limited to 1 per key', async () => {
    const queue = app.get(QueueService);
    await queue.enqueueMany(Array.from({ length: 30 }, (_, i) => ({ queue: 'bounced', payload: { i } })));
    await queue.enqueueMany(Array.from({ length: 30 }, (_, i) => ({ queue: 'bkeys', payload: { i }, concurrencyKey: `k${i % 5}` })));
    const pools = Array.from({ length: 12 }, () => new pg.Pool({ connectionString: bouncedUrl, max: 1 }));
    try {
      const stores = pools.map((p) => new JobStore(p, { transactionPooler: true }));
      const global = await Promise.all(stores.map((s, i) => s.claimLimitedJobs('bounced', 5, `w${i}`, 30_000, { globalConcurrency: 3, rateLimit: undefined })));
      expect(global.flatMap((r) => r.jobs)).toHaveLength(3);
      const perKey = { globalConcurrency: undefined, rateLimit: undefined, concurrencyPerKey: 1 };
      const keyed = await Promise.all(stores.map((s, i) => s.claimLimitedJobs('bkeys', 5, `w${i}`, 30_000, perKey)));
      expect(keyed.flatMap((r) => r.jobs)).toHaveLength(5);
      const { rows } = await db.query(`SELECT concurrency_key AS k, count(*)::int AS n FROM background_jobs WHERE queue_name = 'bkeys' AND status = 'processing' GROUP BY 1 ORDER BY 1`);
      expect(rows).toEqual(['k0', 'k1', 'k2', 'k3', 'k4'].map((k) => ({ k, n: 1 })));
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
  });
});
