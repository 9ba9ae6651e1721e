import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { createTestDatabase } from '@internal/pg-harness';
import { sqlPool, waitFor } from '../support/test-app.js';
import { createFaultTables } from './support/fault-db.js';
import { StallWatch } from './support/stall-watch.js';

// The fault suite's stall watch (support/stall-watch.ts) excuses the reruns a stall of the whole machine causes, and
// only those: this test stalls the process that runs it (a busy loop past half the lease, as a starved CI machine
// does) and reads back what the watch wrote.
describe('the fault suite\'s stall watch', () => {
  let db: pg.Pool;

  beforeAll(async () => {
    db = sqlPool(await createTestDatabase('stall_watch'));
    // The columns the watch and the suite's tables read; the library's migrations are not the subject here.
    await db.query(`CREATE TABLE background_jobs (id bigint PRIMARY KEY, status text NOT NULL, locked_by text)`);
    await createFaultTables(db);
  });
  afterAll(async () => {
    await db?.end();
  });

  it('records the started jobs held when the machine stalled past half the lease, and nothing else', async () => {
    await db.query(`INSERT INTO background_jobs VALUES (1, 'processing', 'w1'), (2, 'processing', 'w1'), (3, 'processing', 'w2'), (4, 'processing', 'w2'), (5, 'processing', 'w2'), (6, 'completed', 'w1')`);
    // Job 2 is only read ahead (not started); job 6 is finished; jobs 4 and 5 start later.
    const starts = new Map<string, [string, number][]>([['w1', [['1', 1], ['6', 1]]], ['w2', [['3', 2]]]]);
    const watch = new StallWatch({ db, leaseMs: 2_000, starts: () => new Map([...starts].map(([w, lines]) => [w, [...lines]])), everyMs: 50 });
    const faults = async () => (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM fault_faults`)).rows[0].n;
    watch.start();
    try {
      await new Promise((resolve) => setTimeout(resolve, 400));
      expect(await faults()).toBe(0); // samples 50 ms apart: no stall
      // Job 4 starts, then the process stalls for 1.2 s before the next sample: the start falls in the stall.
      starts.get('w2')!.push(['4', 1]);
      const until = performance.now() + 1_200;
      while (performance.now() < until); // the stall
      await waitFor('the stall to be recorded', async () => watch.stalls.length === 1, 5_000, 10);
      // Job 5 starts after the stall: a rerun of it must still be reported.
      await new Promise((resolve) => setTimeout(resolve, 200));
      starts.get('w2')!.push(['5', 1]);
      await new Promise((resolve) => setTimeout(resolve, 400));
    } finally {
      await watch.stop();
    }
    expect(watch.stalls).toHaveLength(1);
    expect(watch.stalls[0].ms).toBeGreaterThanOrEqual(1_000);
    const { rows: recorded } = await db.query<{ worker: string; signal: string }>(`SELECT worker, signal FROM fault_faults ORDER BY worker`);
    expect(recorded).toEqual([{ worker: 'w1', signal: 'STALL' }, { worker: 'w2', signal: 'STALL' }]);
    const { rows: held } = await db.query<{ key: string }>(`SELECT worker || ':' || job_id || '/' || attempt AS key FROM fault_held ORDER BY 1`);
    expect(held.map((h) => h.key)).toEqual(['w1:1/1', 'w2:3/2', 'w2:4/1']);
    expect(watch.stalls[0].held).toBe(3);
  });
});
