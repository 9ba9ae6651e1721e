import { Injectable } from '@nestjs/common';
import { describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { beginWithQueueLock } from '../src/store/claim.sql.js';
import { queueLockKey } from '../src/store/claim.store.js';
import { useTestApp, waitFor } from './support/test-app.js';

// Connection roles (issue 39 item 5, issue 41): nothing on the leases pool waits on another session's lock. The
// claims of limited queues take their queue's advisory lock; they waited for it, each holding a connection of the
// leases pool (2 by default), so a process holding two queues' locks frozen (up to LIMIT_LOCK_IDLE_MS) starved this
// process's heartbeats: a 1 s lease lapsed, the sweeper put a running job back and it ran again (the simulation's
// seeds 31-33, "runs redone without cause" in processes that had just started). The lock is now tried, not awaited.
const runs: string[] = [];
let release: () => void = () => undefined;
const held = new Promise<void>((resolve) => (release = resolve));

@Injectable()
class Handlers {
  @JobHandler('lp-long', { concurrency: 1 })
  async long(job: Job) {
    runs.push(`${job.id}:${job.attempt}`);
    await held;
  }

  @JobHandler('lp-lim-a', { globalConcurrency: 1, prefetch: 0, eagerStart: false })
  async a() {}

  @JobHandler('lp-lim-b', { globalConcurrency: 1, prefetch: 0, eagerStart: false })
  async b() {}
}

describe('limited queues whose locks another session holds never starve the leases pool', () => {
  const t = useTestApp('lease_pool_locks', { providers: [Handlers], queue: { leaseMs: 1_000, heartbeatMs: 200, maintenance: { sweepIntervalMs: 200 } } });

  it('a running job keeps its 1 s lease while both limited queues wait 1.8 s for their locks', async () => {
    const queue = t.app.get(QueueService);
    const id = await queue.enqueue('lp-long', {});
    await waitFor('the long job running', async () => runs.length === 1);
    // Another session takes both queues' locks and holds them, as a claimer frozen right after its first round trip.
    const frozen = [new pg.Client({ connectionString: t.url }), new pg.Client({ connectionString: t.url })];
    for (const [i, client] of frozen.entries()) {
      client.on('error', () => undefined);
      await client.connect();
      await client.query(beginWithQueueLock(queueLockKey(i === 0 ? 'lp-lim-a' : 'lp-lim-b')));
    }
    // Jobs in both limited queues: their claims go for the locks now.
    await queue.enqueueMany([{ queue: 'lp-lim-a', payload: {} }, { queue: 'lp-lim-b', payload: {} }]);
    await new Promise((resolve) => setTimeout(resolve, 1_800));
    await Promise.all(frozen.map((c) => c.query('ROLLBACK').then(() => c.end())));
    await waitFor('the limited jobs completed', async () => (await t.db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name LIKE 'lp-lim-%' AND status = 'completed'`)).rows[0].n === 2, 20_000);
    release();
    await waitFor('the long job completed', async () => (await t.db.query(`SELECT status FROM background_jobs WHERE id = $1`, [id])).rows[0].status === 'completed', 20_000);
    const { rows: [row] } = await t.db.query<{ attempts: number }>(`SELECT attempts FROM background_jobs WHERE id = $1`, [id]);
    expect({ runs, attempts: row.attempts }).toEqual({ runs: [`${id}:1`], attempts: 1 });
  }, 60_000);
});
