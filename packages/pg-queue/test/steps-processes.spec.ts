import { describe, expect, it } from '@jest/globals';
import { once } from 'node:events';
import { useProducerAndWorkers } from './support/producer-and-workers.js';
import { waitFor } from './support/test-app.js';

// Durable steps across a crash: a worker process is SIGKILLed between a job's two steps; another process takes the
// job once its lease lapses (its sweeper puts it back) and resumes after the first step. Asserted from the tables: the
// first step's function ran once (in the killed process), the second once (in the survivor).
describe('durable steps across processes', () => {
  const t = useProducerAndWorkers('steps-processes', new URL('./steps/step-worker.ts', import.meta.url), (db) => db.query(`CREATE TABLE effects (job_id int8, step text, pid int)`));

  it('SIGKILL between two steps: another process resumes after the first step; each step function ran once', async () => {
    const queue = t.queue;
    const victim = await t.spawnWorker({ HOLD: '1' });
    // In id order, as the effects are read back (the three enqueues run side by side).
    const ids = (await Promise.all([1, 2, 3].map((order) => queue.enqueue('sx-order', { order })))).sort((a, b) => Number(a) - Number(b));
    // Every job recorded its charge and stopped between the steps (and, read ahead or not, all started: concurrency 4).
    await waitFor('all between the steps', async () => (await t.db.query(`SELECT count(*)::int AS n FROM effects WHERE step = 'between'`)).rows[0].n === 3, 30_000);
    const recorded = await t.db.query(`SELECT id, jsonb_array_length(steps) AS n, attempts, buffered FROM background_jobs WHERE id = ANY($1::int8[]) ORDER BY id`, [ids]);
    expect(recorded.rows.map((r) => [r.n, r.attempts, r.buffered])).toEqual([[1, 1, false], [1, 1, false], [1, 1, false]]);
    victim.kill('SIGKILL');
    await once(victim, 'exit');

    const survivor = await t.spawnWorker({});
    for (const id of ids) {
      const job = await queue.waitFor(id, { timeoutMs: 30_000 });
      expect(job).toMatchObject({ charge: { pid: victim.pid }, shipment: { shipment: expect.stringMatching(/^sh_/) } });
    }
    const effects = await t.db.query(`SELECT job_id::text AS id, step, pid FROM effects WHERE step <> 'between' ORDER BY job_id, step`);
    expect(effects.rows).toEqual(ids.flatMap((id) => [{ id, step: 'charge', pid: victim.pid }, { id, step: 'ship', pid: survivor.pid }]));
    for (const id of ids) {
      const record = await queue.get(id);
      expect(record).toMatchObject({ status: 'completed', attempts: 2 });
      expect(record!.steps.map((s) => [s.name, s.kind, s.attempt])).toEqual([['charge', 'step', 1], ['ship', 'step', 2]]);
    }
  }, 90_000);
});
