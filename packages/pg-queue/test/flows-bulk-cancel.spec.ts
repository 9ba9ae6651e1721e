// A bulk cancel that takes several jobs of one flow in one statement: the flow's outcome must not depend on the
// order in which the statement steps them (the simulation's seed 595149389: a flow ended `completed` in the
// transaction of a bulk cancel that had cancelled a job whose cancel fails the flow).
import { describe, expect, it } from '@jest/globals';
import { QueueService } from 'nestjs-pg-queue';
import { AdminStore } from '../src/store/admin.store.js';
import { useTestApp } from './support/test-app.js';

describe('a bulk cancel of several jobs of one flow', () => {
  const t = useTestApp('flows_bulk_cancel', { queue: { workers: false, maintenance: { enabled: false } } });
  const flowStatus = async (id: string) => (await t.db.query<{ status: string }>(`SELECT status FROM background_flows WHERE id = $1`, [id])).rows[0].status;

  it.each([
    ['the job whose dependents continue first', ['x', 'c']],
    ['the job that fails the flow first', ['c', 'x']],
  ])('fails the flow whatever order the statement steps them in (%s)', async (_, order) => {
    const queue = t.app.get(QueueService);
    // x's only dependent continues past it and has completed (x failed, y ran; x was retried); c has no dependent, so
    // its cancel fails the flow.
    const jobs = [
      { ref: 'x', queue: 'fbc-idle', payload: {} },
      { ref: 'c', queue: 'fbc-idle', payload: {} },
    ].sort((a, b) => order.indexOf(a.ref) - order.indexOf(b.ref));
    const flow = await queue.enqueueFlow({
      jobs: [...jobs, { ref: 'y', queue: 'fbc-idle', payload: {}, dependsOn: [{ ref: 'x', onFailure: 'continue' as const }] }],
    });
    await t.db.query(`UPDATE background_job_deps SET done = true WHERE child_id = $1`, [flow.jobs.y]);
    await t.db.query(`UPDATE background_jobs SET status = 'completed', finished_at = now() WHERE id = $1`, [flow.jobs.y]);
    const bulk = await new AdminStore(t.db).bulkBatch('cancel', { ids: [flow.jobs.x, flow.jobs.c], statuses: ['queued'] }, '0', 100);
    expect(bulk.changed).toBe(2);
    expect(await flowStatus(flow.id)).toBe('failed');
  });
});
