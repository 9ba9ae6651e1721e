import { Injectable } from '@nestjs/common';
import { describe, expect, it } from '@jest/globals';
import { DataSource } from 'typeorm';
import { JobEvents, JobHandler, PgQueueError, QueueService, type FlowRecord, type Job, type JobEvent } from 'nestjs-pg-queue';
import { JobStore, MaintenanceScheduler } from '../src/internal.js';
import { AdminStore } from '../src/store/admin.store.js';
import { LEASE_JOB_STORE } from '../src/pg-queue.constants.js';
import { useTestApp, waitFor } from './support/test-app.js';

interface Step {
  tag: string;
  fail?: boolean;
  holdMs?: number;
}

const released = new Set<string>();

/** Runs of a queue at the same time, at most (from the runs table: start, and end in detail). */
async function maxOverlap(tag: string): Promise<number> {
  const { rows } = await t.db.query(
    `SELECT max((SELECT count(*) FROM runs AS o WHERE o.tag LIKE $1 AND o.started_at <= r.started_at AND (o.detail ->> 'end')::timestamptz > r.started_at))::int AS n
     FROM runs AS r WHERE r.tag LIKE $1`,
    [tag],
  );
  return rows[0].n;
}

@Injectable()
class FlowHandlers {
  constructor(private readonly queue: QueueService) {}

  /** A step that holds 60 ms and records its end, to count how many ran at once. */
  private async timed(job: Job<{ tag: string }>) {
    await t.db.query(`INSERT INTO runs (job_id, tag, started_at) VALUES ($1, $2, clock_timestamp())`, [job.id, job.payload.tag]);
    await new Promise((r) => setTimeout(r, 60));
    await t.db.query(`UPDATE runs SET detail = jsonb_build_object('end', clock_timestamp()) WHERE job_id = $1`, [job.id]);
  }

  @JobHandler('fl-global', { globalConcurrency: 2, concurrency: 10 })
  async global(job: Job<{ tag: string }>) {
    await this.timed(job);
  }

  @JobHandler('fl-keyed', { concurrencyPerKey: 1, concurrency: 10 })
  async keyed(job: Job<{ tag: string }>) {
    await this.timed(job);
  }

  /** What a recurring schedule fires: it starts a flow. */
  @JobHandler('fl-starter')
  async starter(job: Job) {
    const flow = await this.queue.enqueueFlow({
      name: `from schedule, job ${job.id}`,
      jobs: [
        { ref: 'one', queue: 'fl-step', payload: { tag: `sched-${job.id}-one` } },
        { ref: 'two', queue: 'fl-step', payload: { tag: `sched-${job.id}-two` }, dependsOn: ['one'] },
      ],
    });
    return { flow: flow.id };
  }
  @JobHandler('fl-step', { maxAttempts: 1 })
  async step(job: Job<Step>) {
    await t.db.query(`INSERT INTO runs (job_id, tag, started_at) VALUES ($1, $2, clock_timestamp())`, [job.id, job.payload.tag]);
    if (job.payload.holdMs) {
      const until = Date.now() + job.payload.holdMs;
      while (Date.now() < until && !job.signal.aborted && !released.has(job.payload.tag)) await new Promise((r) => setTimeout(r, 10));
    }
    if (job.payload.fail) throw new Error(`${job.payload.tag} refused`);
    const parents = await job.parents();
    // A held run's last act before it returns: the tests wait for this row, not for a while.
    if (job.payload.holdMs) await t.db.query(`UPDATE runs SET detail = jsonb_build_object('returned', true) WHERE job_id = $1`, [job.id]);
    return { tag: job.payload.tag, parents: parents.map((p) => ({ ref: p.ref, status: p.status, result: p.result })) };
  }

  @JobHandler('fl-undo')
  async undo(job: Job<{ undo: string }>) {
    const original = await job.compensating();
    await t.db.query(`INSERT INTO runs (job_id, tag, started_at, detail) VALUES ($1, $2, clock_timestamp(), $3)`, [job.id, `undo:${job.payload.undo}`, JSON.stringify(original)]);
  }

  @JobHandler('fl-split')
  async split(job: Job<{ parts: number }>) {
    const chunks = Array.from({ length: job.payload.parts }, (_, i) => ({ ref: `chunk-${i}`, queue: 'fl-step', payload: { tag: `chunk-${i}` } }));
    await job.spawn(chunks);
    await job.spawn([{ ref: 'merge', queue: 'fl-step', payload: { tag: 'merge' }, dependsOn: chunks.map((c) => c.ref) }]);
    return { planned: job.payload.parts };
  }

  @JobHandler('fl-split-fail', { maxAttempts: 1 })
  async splitThenFail(job: Job) {
    await job.spawn([{ ref: 'never', queue: 'fl-step', payload: { tag: 'never' } }]);
    throw new Error('split failed after spawning');
  }
}

const t = useTestApp('flows', { providers: [FlowHandlers], queue: { maintenance: { enabled: false } } }, async (db) => {
  await db.query(`CREATE TABLE runs (job_id int8, tag text, started_at timestamptz, detail jsonb)`);
});

const queue = () => t.app.get(QueueService);
const flowDone = (id: string) => queue().waitForFlow(id, { timeoutMs: 20_000 });
const runsOf = async (tags: string[]) => (await t.db.query(`SELECT tag, count(*)::int AS n FROM runs WHERE tag = ANY($1) GROUP BY tag`, [tags])).rows;
const jobRows = async (flowId: string) =>
  (await t.db.query(`SELECT id::text, flow_ref AS ref, status::text, attempts, last_error, locked_at, finished_at, result FROM background_jobs WHERE flow_id = $1 ORDER BY id`, [flowId])).rows;

/**
 * A barrier instead of a sleep: a job of `queueName` enqueued now has completed. The worker writes outcomes in the
 * order its jobs end, so an outcome of that queue's worker from before (a late completion that should be fenced out)
 * has been written or refused by then.
 */
async function laterJobCompleted(queueName: string, tag: string): Promise<void> {
  const id = await queue().enqueue(queueName, { tag });
  await queue().waitFor(id, { timeoutMs: 20_000 });
}

/**
 * A barrier for a queue that takes nothing (paused): a claim of `queueName` sent from now on (woken by a NOTIFY) has
 * come back. Whatever that queue's worker could have claimed when it was sent, it would have claimed.
 */
async function claimReturned(queueName: string): Promise<void> {
  const store = t.app.get<JobStore>(LEASE_JOB_STORE); // the workers' claims run on the leases pool's store
  const claimJobs = store.claimJobs;
  let returned = false;
  store.claimJobs = async (...args) => {
    const answer = await claimJobs.apply(store, args);
    if (args[0] === queueName) returned = true;
    return answer;
  };
  try {
    await t.db.query(`SELECT pg_notify('pg_queue_jobs', $1)`, [queueName]);
    await waitFor(`a claim of ${queueName} sent now to come back`, async () => returned, 10_000, 5);
  } finally {
    store.claimJobs = claimJobs;
  }
}

/** Every job ran at most once, and none was claimed before each of its parents had finished (from the tables). */
async function assertOrder(flowId: string) {
  const { rows } = await t.db.query(
    `SELECT c.flow_ref AS child, p.flow_ref AS parent FROM background_job_deps AS d
     JOIN background_jobs AS c ON c.id = d.child_id JOIN background_jobs AS p ON p.id = d.parent_id
     WHERE d.flow_id = $1 AND c.locked_at IS NOT NULL AND (p.finished_at IS NULL OR c.locked_at < p.finished_at)`,
    [flowId],
  );
  expect(rows).toEqual([]);
  const twice = await t.db.query(`SELECT r.job_id FROM runs AS r JOIN background_jobs AS j ON j.id = r.job_id WHERE j.flow_id = $1 GROUP BY r.job_id HAVING count(*) > 1`, [flowId]);
  expect(twice.rows).toEqual([]);
}

describe('flows', () => {
  it('runs a chain in order, each job once, each child seeing its parent\'s result', async () => {
    const flow = await queue().enqueueFlow({
      name: 'chain',
      jobs: [
        { ref: 'a', queue: 'fl-step', payload: { tag: 'chain-a' } },
        { ref: 'b', queue: 'fl-step', payload: { tag: 'chain-b' }, dependsOn: ['a'] },
        { ref: 'c', queue: 'fl-step', payload: { tag: 'chain-c' }, dependsOn: ['b'] },
      ],
    });
    const done = await flowDone(flow.id);
    expect(done.status).toBe('completed');
    expect(done.name).toBe('chain');
    expect(done.jobs.map((j) => [j.ref, j.status])).toEqual([['a', 'completed'], ['b', 'completed'], ['c', 'completed']]);
    const c = done.jobs.find((j) => j.ref === 'c')!;
    expect(c.result).toEqual({ tag: 'chain-c', parents: [{ ref: 'b', status: 'completed', result: { tag: 'chain-b', parents: [{ ref: 'a', status: 'completed', result: { tag: 'chain-a', parents: [] } }] } }] });
    await assertOrder(flow.id);
    expect((await queue().get(flow.jobs.b))?.flowId).toBe(flow.id);
  });

  it('runs a fan-out and fan-in, and a diamond', async () => {
    const width = 30;
    const parts = Array.from({ length: width }, (_, i) => ({ ref: `part-${i}`, queue: 'fl-step', payload: { tag: `fan-${i}` }, dependsOn: ['root'] }));
    const flow = await queue().enqueueFlow({
      jobs: [{ ref: 'root', queue: 'fl-step', payload: { tag: 'fan-root' } }, ...parts, { ref: 'sink', queue: 'fl-step', payload: { tag: 'fan-sink' }, dependsOn: parts.map((p) => p.ref) }],
    });
    const diamond = await queue().enqueueFlow({
      jobs: [
        { ref: 'top', queue: 'fl-step', payload: { tag: 'd-top' } },
        { ref: 'left', queue: 'fl-step', payload: { tag: 'd-left' }, dependsOn: ['top'] },
        { ref: 'right', queue: 'fl-step', payload: { tag: 'd-right' }, dependsOn: ['top'] },
        { ref: 'bottom', queue: 'fl-step', payload: { tag: 'd-bottom' }, dependsOn: ['left', 'right'] },
      ],
    });
    expect((await flowDone(flow.id)).status).toBe('completed');
    expect((await flowDone(diamond.id)).status).toBe('completed');
    const sink = (await jobRows(flow.id)).find((j) => j.ref === 'sink');
    expect(sink.result.parents).toHaveLength(width);
    await assertOrder(flow.id);
    await assertOrder(diamond.id);
    expect((await runsOf(['d-bottom', 'fan-sink'])).map((r) => r.n)).toEqual([1, 1]);
  });

  it('refuses a bad flow before storing anything, naming the ref', async () => {
    const before = (await t.db.query(`SELECT count(*)::int AS n FROM background_jobs`)).rows[0].n;
    const bad: [unknown, RegExp][] = [
      [{ jobs: [{ ref: 'a', queue: 'fl-step', payload: {}, dependsOn: ['b'] }, { ref: 'b', queue: 'fl-step', payload: {}, dependsOn: ['a'] }] }, /cycle: "a" -> "b" -> "a"|cycle: "b" -> "a" -> "b"/],
      [{ jobs: [{ ref: 'a', queue: 'fl-step', payload: {}, dependsOn: ['nope'] }] }, /job "a" depends on "nope", which is not a job of this flow/],
      [{ jobs: [{ ref: 'a', queue: 'fl-step', payload: {} }, { ref: 'a', queue: 'fl-step', payload: {} }] }, /two jobs have the ref "a"/],
      [{ jobs: [{ ref: 'a', queue: 'fl-step', payload: {} }, { ref: 'b', queue: 'fl-step', payload: {}, dependsOn: ['a'], uniqueKey: 'k' }] }, /job "b" has a uniqueKey and parents/],
      [{ jobs: [{ ref: 'a', queue: 'fl-step', payload: { n: 10n } }] }, /job "a"/],
      [{ jobs: [{ ref: 'a', queue: 'fl-step', payload: {}, dependsOn: [{ ref: 'a', onFailure: 'ignore' }] }] }, /onFailure "ignore"/],
      [{ jobs: [{ ref: 'a b', queue: 'fl-step', payload: {} }] }, /ref "a b"/],
      [{ jobs: [] }, /non-empty array/],
    ];
    for (const [spec, message] of bad) await expect(queue().enqueueFlow(spec as never)).rejects.toThrow(message);
    expect((await t.db.query(`SELECT count(*)::int AS n FROM background_jobs`)).rows[0].n).toBe(before);
  });

  it('fails the dependents of a job that failed for good, naming it, and fails the flow; continue lets a fan-in run', async () => {
    const failing = await queue().enqueueFlow({
      jobs: [
        { ref: 'a', queue: 'fl-step', payload: { tag: 'f-a' } },
        { ref: 'b', queue: 'fl-step', payload: { tag: 'f-b', fail: true }, dependsOn: ['a'] },
        { ref: 'c', queue: 'fl-step', payload: { tag: 'f-c' }, dependsOn: ['b'] },
        { ref: 'd', queue: 'fl-step', payload: { tag: 'f-d' }, dependsOn: [{ ref: 'b', onFailure: 'cancel' }] },
        { ref: 'e', queue: 'fl-step', payload: { tag: 'f-e' }, dependsOn: ['c'] },
      ],
    });
    const done = await flowDone(failing.id);
    expect(done.status).toBe('failed');
    expect(done.reason).toBe(`job ${failing.jobs.b} (b) failed`);
    const byRef = Object.fromEntries(done.jobs.map((j) => [j.ref, j]));
    expect(byRef.c.status).toBe('failed');
    expect(byRef.c.lastError).toBe(`parent job ${failing.jobs.b} (b) failed`);
    expect(byRef.d.status).toBe('cancelled');
    expect(byRef.e.status).toBe('failed');
    expect(byRef.e.lastError).toBe(`parent job ${failing.jobs.c} (c) failed`);
    expect(await runsOf(['f-c', 'f-d', 'f-e'])).toEqual([]);

    const parts = [0, 1, 2, 3].map((i) => ({ ref: `p${i}`, queue: 'fl-step', payload: { tag: `cont-${i}`, fail: i === 2 } }));
    const tolerant = await queue().enqueueFlow({
      jobs: [...parts, { ref: 'zip', queue: 'fl-step', payload: { tag: 'cont-zip' }, dependsOn: parts.map((p) => ({ ref: p.ref, onFailure: 'continue' as const })) }],
    });
    const ended = await flowDone(tolerant.id);
    expect(ended.status).toBe('completed');
    const zip = ended.jobs.find((j) => j.ref === 'zip')!;
    expect(zip.status).toBe('completed');
    expect((zip.result as { parents: { ref: string; status: string }[] }).parents.map((p) => p.status)).toEqual(['completed', 'completed', 'failed', 'completed']);
  });

  it('compensates the completed jobs of a failed flow in reverse order, each once, with their results', async () => {
    const flow = await queue().enqueueFlow({
      name: 'order',
      jobs: [
        { ref: 'charge', queue: 'fl-step', payload: { tag: 's-charge' }, compensate: { queue: 'fl-undo', payload: { undo: 'charge' } } },
        { ref: 'reserve', queue: 'fl-step', payload: { tag: 's-reserve' }, dependsOn: ['charge'], compensate: { queue: 'fl-undo', payload: { undo: 'reserve' } } },
        { ref: 'label', queue: 'fl-step', payload: { tag: 's-label' }, dependsOn: ['reserve'] },
        { ref: 'ship', queue: 'fl-step', payload: { tag: 's-ship', fail: true }, dependsOn: ['label'], compensate: { queue: 'fl-undo', payload: { undo: 'ship' } } },
        { ref: 'email', queue: 'fl-step', payload: { tag: 's-email' }, dependsOn: ['ship'] },
      ],
    });
    const done = await flowDone(flow.id);
    expect(done.status).toBe('compensated');
    const undo = (await t.db.query(`SELECT tag, detail FROM runs WHERE tag LIKE 'undo:%' AND job_id IN (SELECT id FROM background_jobs WHERE flow_id = $1) ORDER BY started_at`, [flow.id])).rows;
    expect(undo.map((r) => r.tag)).toEqual(['undo:reserve', 'undo:charge']);
    expect(undo[1].detail).toMatchObject({ id: flow.jobs.charge, ref: 'charge', queue: 'fl-step', payload: { tag: 's-charge' }, result: { tag: 's-charge' } });
    const compensations = done.jobs.filter((j) => j.compensates !== null);
    expect(compensations.map((j) => [j.ref, j.status, j.compensates])).toEqual([
      ['compensate:charge', 'completed', flow.jobs.charge],
      ['compensate:reserve', 'completed', flow.jobs.reserve],
    ]);
    expect(await runsOf(['s-email'])).toEqual([]);
  });

  it('cancels a flow: unstarted jobs never run, a running one is signalled and its outcome discarded', async () => {
    const flow = await queue().enqueueFlow({
      jobs: [
        { ref: 'long', queue: 'fl-step', payload: { tag: 'cx-long', holdMs: 10_000 } },
        { ref: 'after', queue: 'fl-step', payload: { tag: 'cx-after' }, dependsOn: ['long'] },
        { ref: 'later', queue: 'fl-step', payload: { tag: 'cx-later' }, delayMs: 60_000 },
      ],
    });
    await waitFor('the long job to start', async () => (await runsOf(['cx-long'])).length === 1);
    expect(await queue().cancelFlow(flow.id)).toBe(true);
    expect(await queue().cancelFlow(flow.id)).toBe(false);
    const done = await flowDone(flow.id);
    expect(done.status).toBe('cancelled');
    expect(done.jobs.map((j) => j.status)).toEqual(['cancelled', 'cancelled', 'cancelled']);
    // The signalled handler has returned, and a job of its worker enqueued since has completed: its outcome was dropped.
    await waitFor('the long job’s handler returned', async () =>
      (await t.db.query(`SELECT 1 FROM runs WHERE job_id = $1 AND detail ->> 'returned' = 'true'`, [flow.jobs.long])).rowCount === 1);
    await laterJobCompleted('fl-step', 'cx-barrier');
    expect((await jobRows(flow.id)).map((j) => j.status)).toEqual(['cancelled', 'cancelled', 'cancelled']);
    expect(await runsOf(['cx-after', 'cx-later'])).toEqual([]);
  });

  it('retry of a failed job brings its dependents back and the flow completes', async () => {
    const flow = await queue().enqueueFlow({
      jobs: [
        { ref: 'a', queue: 'fl-step', payload: { tag: 'r-a', fail: true } },
        { ref: 'b', queue: 'fl-step', payload: { tag: 'r-b' }, dependsOn: ['a'] },
        { ref: 'side', queue: 'fl-step', payload: { tag: 'r-side' }, delayMs: 400 },
      ],
    });
    expect((await flowDone(flow.id)).status).toBe('failed');
    expect((await jobRows(flow.id)).map((j) => j.status)).toEqual(['failed', 'failed', 'cancelled']);
    await t.db.query(`UPDATE background_jobs SET payload = '{"tag":"r-a"}' WHERE id = $1`, [flow.jobs.a]);
    expect(await queue().retry(flow.jobs.a)).toBe(true);
    expect((await queue().getFlow(flow.id))?.status).toBe('running');
    const done = await flowDone(flow.id);
    expect(done.status).toBe('completed');
    expect(done.jobs.map((j) => j.status)).toEqual(['completed', 'completed', 'completed']);
    expect((await runsOf(['r-a', 'r-b', 'r-side'])).sort((x, y) => x.tag.localeCompare(y.tag))).toEqual([
      { tag: 'r-a', n: 2 },
      { tag: 'r-b', n: 1 },
      { tag: 'r-side', n: 1 },
    ]);
  });

  it("creates a flow in the caller's transaction: a rollback leaves nothing, a commit runs it", async () => {
    const dataSource = new DataSource({ type: 'postgres', url: t.url });
    await dataSource.initialize();
    try {
      const spec = { jobs: [{ ref: 'x', queue: 'fl-step', payload: { tag: 'tx-x' } }, { ref: 'y', queue: 'fl-step', payload: { tag: 'tx-y' }, dependsOn: ['x'] }] };
      let rolledBack: string | undefined;
      await expect(
        dataSource.transaction(async (manager) => {
          rolledBack = (await queue().enqueueFlow(spec, { manager })).id;
          throw new Error('roll back');
        }),
      ).rejects.toThrow('roll back');
      expect(await queue().getFlow(rolledBack!)).toBeNull();
      expect((await t.db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE payload->>'tag' IN ('tx-x', 'tx-y')`)).rows[0].n).toBe(0);
      const committed = await dataSource.transaction((manager) => queue().enqueueFlow(spec, { manager }));
      expect((await flowDone(committed.id)).status).toBe('completed');
    } finally {
      await dataSource.destroy();
    }
  });

  it('refuses a flow whose job names a unique key already held, storing nothing; the caller\'s transaction stays usable', async () => {
    await queue().enqueue('fl-hold-none', {}, { uniqueKey: 'held-key' });
    const spec = { jobs: [{ ref: 'keyed', queue: 'fl-hold-none', payload: {}, uniqueKey: 'held-key' }, { ref: 'next', queue: 'fl-step', payload: { tag: 'uk-next' }, dependsOn: ['keyed'] }] };
    await expect(queue().enqueueFlow(spec)).rejects.toThrow(/job "keyed" \(queue "fl-hold-none", uniqueKey "held-key"\): another job holds the key; nothing of the flow was stored/);
    const dataSource = new DataSource({ type: 'postgres', url: t.url });
    await dataSource.initialize();
    try {
      const after = await dataSource.transaction(async (manager) => {
        await expect(queue().enqueueFlow(spec, { manager })).rejects.toThrow(PgQueueError);
        return queue().enqueue('fl-step', { tag: 'uk-after' }, { manager });
      });
      expect(await queue().get(after)).not.toBeNull();
    } finally {
      await dataSource.destroy();
    }
    expect((await t.db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE payload->>'tag' = 'uk-next'`)).rows[0].n).toBe(0);
  });

  it('spawns children with the completion; a failed attempt spawns nothing', async () => {
    const flow = await queue().enqueueFlow({ jobs: [{ ref: 'split', queue: 'fl-split', payload: { parts: 12 } }, { ref: 'report', queue: 'fl-step', payload: { tag: 'sp-report' }, dependsOn: ['split'] }] });
    const done = await flowDone(flow.id);
    expect(done.status).toBe('completed');
    expect(done.jobs).toHaveLength(2 + 12 + 1);
    const merge = done.jobs.find((j) => j.ref === 'split/merge')!;
    expect((merge.result as { parents: unknown[] }).parents).toHaveLength(12);
    await assertOrder(flow.id);

    const failed = await queue().enqueueFlow({ jobs: [{ ref: 'splitter', queue: 'fl-split-fail', payload: {} }] });
    expect((await flowDone(failed.id)).jobs.map((j) => j.ref)).toEqual(['splitter']);
    expect(await runsOf(['never'])).toEqual([]);
  });

  it('waitForFlow: resolves at the flow\'s end whichever way it ended; times out, aborts and refuses an unknown flow with clear errors', async () => {
    const flow = await queue().enqueueFlow({ jobs: [{ ref: 'late', queue: 'fl-step', payload: { tag: 'wf-late' }, delayMs: 3_600_000 }] });
    await expect(queue().waitForFlow(flow.id, { timeoutMs: 150 })).rejects.toThrow(`flow ${flow.id} did not finish within 150 ms (waitForFlow timeoutMs); it keeps running`);
    const controller = new AbortController();
    const aborted = queue().waitForFlow(flow.id, { signal: controller.signal });
    setTimeout(() => controller.abort(new Error('caller gave up')), 50);
    await expect(aborted).rejects.toThrow('caller gave up');
    const waiting = queue().waitForFlow(flow.id, { timeoutMs: 10_000 });
    await queue().cancelFlow(flow.id);
    expect((await waiting).status).toBe('cancelled');
    await expect(queue().waitForFlow('987654321')).rejects.toThrow('waitForFlow(987654321): no such flow.');
    await expect(queue().waitForFlow('x' as never)).rejects.toThrow('Invalid flow id "x"');
    // Its options are checked as waitFor's are, before any wait starts.
    await expect(queue().waitForFlow(flow.id, { timeoutMs: -5 })).rejects.toThrow(`Invalid waitForFlow(${flow.id}) option timeoutMs=-5: expected an integer from 1 to 2147483647.`);
    await expect(queue().waitForFlow(flow.id, { signal: 'stop' as never })).rejects.toThrow(`Invalid waitForFlow(${flow.id}) option signal`);
    await expect(queue().waitForFlow(flow.id, null as never)).rejects.toThrow(`waitForFlow(${flow.id}) options must be an object`);
  });

  it('counts blocked jobs apart from queued ones', async () => {
    const flow = await queue().enqueueFlow({
      jobs: [
        { ref: 'wait', queue: 'fl-step', payload: { tag: 'st-wait' }, delayMs: 60_000 },
        { ref: 'child', queue: 'fl-stats', payload: {}, dependsOn: ['wait'] },
      ],
    });
    const stats = await queue().stats();
    expect(stats['fl-stats']).toMatchObject({ blocked: 1, queued: 0 });
    expect((await queue().getFlow(flow.id))?.jobs[1].waitingFor).toEqual(['wait']);
    await queue().cancelFlow(flow.id);
  });
});

describe('flows with the rest of the library', () => {
  it('limits hold for unblocked jobs: globalConcurrency 2 and concurrencyPerKey 1 on a fan-out', async () => {
    const fan = (queue: string, key?: (i: number) => string) =>
      Array.from({ length: 8 }, (_, i) => ({ ref: `c${i}`, queue, payload: { tag: `${queue}-${i}` }, dependsOn: ['root'], ...(key ? { concurrencyKey: key(i) } : {}) }));
    const global = await queue().enqueueFlow({ jobs: [{ ref: 'root', queue: 'fl-step', payload: { tag: 'lim-root' } }, ...fan('fl-global')] });
    const keyed = await queue().enqueueFlow({ jobs: [{ ref: 'root', queue: 'fl-step', payload: { tag: 'lim-root2' } }, ...fan('fl-keyed', (i) => `k${i % 2}`)] });
    expect((await flowDone(global.id)).status).toBe('completed');
    expect((await flowDone(keyed.id)).status).toBe('completed');
    expect(await maxOverlap('fl-global-%')).toBeLessThanOrEqual(2);
    expect(await maxOverlap('fl-keyed-%')).toBeLessThanOrEqual(2); // two keys, one at a time each
    const perKey = await t.db.query(
      `SELECT max(n)::int AS n FROM (SELECT (SELECT count(*) FROM runs AS o JOIN background_jobs AS oj ON oj.id = o.job_id
         WHERE oj.concurrency_key = j.concurrency_key AND o.tag LIKE 'fl-keyed-%' AND o.started_at <= r.started_at AND (o.detail ->> 'end')::timestamptz > r.started_at) AS n
       FROM runs AS r JOIN background_jobs AS j ON j.id = r.job_id WHERE r.tag LIKE 'fl-keyed-%') AS x`,
    );
    expect(perKey.rows[0].n).toBe(1);
  });

  it('a paused queue holds an unblocked job until it is resumed', async () => {
    await queue().pause('fl-step');
    try {
      const flow = await queue().enqueueFlow({ jobs: [{ ref: 'a', queue: 'fl-undo', payload: { undo: 'pause-parent' } }, { ref: 'b', queue: 'fl-step', payload: { tag: 'pause-child' }, dependsOn: ['a'] }] });
      await waitFor('the parent to complete', async () => (await queue().get(flow.jobs.a))?.status === 'completed');
      expect((await queue().get(flow.jobs.b))?.status).toBe('queued');
      await claimReturned('fl-step'); // a claim sent with b queued came back without it
      expect(await runsOf(['pause-child'])).toEqual([]);
      expect((await queue().get(flow.jobs.b))?.status).toBe('queued');
      await queue().resume('fl-step');
      expect((await flowDone(flow.id)).status).toBe('completed');
    } finally {
      await queue().resume('fl-step');
    }
  });

  it('a parent whose lease was lost cannot unblock its children: its late completion is fenced out', async () => {
    const store = t.app.get(JobStore);
    const flow = await queue().enqueueFlow({ jobs: [{ ref: 'a', queue: 'fl-fence', payload: {} }, { ref: 'b', queue: 'fl-step', payload: { tag: 'fence-b' }, dependsOn: ['a'] }] });
    const first = await store.claimJobs('fl-fence', 1, 'w-stale', 60_000);
    // Swept (its worker froze past the lease) and claimed again by another worker.
    await t.db.query(`UPDATE background_jobs SET status = 'queued', lease_expires_at = NULL WHERE id = $1`, [flow.jobs.a]);
    const second = await store.claimJobs('fl-fence', 1, 'w-live', 60_000);
    expect(second.jobs.map((j) => j.id)).toEqual([flow.jobs.a]);
    // Refused: the statement changed nothing, so nothing follows it (no flow step ran, no second look is taken).
    expect(await store.completeJobs('w-stale', first.jobs)).toEqual(new Set([flow.jobs.a]));
    expect((await queue().get(flow.jobs.b))?.status).toBe('blocked');
    expect(await store.completeJobs('w-live', second.jobs)).toEqual(new Set());
    expect((await flowDone(flow.id)).status).toBe('completed');
    expect(await runsOf(['fence-b'])).toEqual([{ tag: 'fence-b', n: 1 }]);
  });

  it('completedRetentionMs 0: a completion deletes plain jobs but keeps a flow job, completed, and its dependent runs', async () => {
    const store = t.app.get(JobStore);
    const flow = await queue().enqueueFlow({ jobs: [{ ref: 'a', queue: 'fl-zero', payload: { n: 1 } }, { ref: 'b', queue: 'fl-step', payload: { tag: 'zero-b' }, dependsOn: ['a'] }] });
    const plain = await queue().enqueue('fl-zero', { n: 2 });
    const claimed = await store.claimJobs('fl-zero', 2, 'w-zero', 60_000);
    expect(claimed.jobs.map((j) => j.id).sort()).toEqual([flow.jobs.a, plain].sort());
    // The statement a worker of an app with completedRetentionMs 0 sends.
    const settled = await store.settleCompletions('w-zero', claimed.jobs, true);
    expect(settled.answer).toEqual(new Set());
    expect(settled.flowJobs).toEqual([flow.jobs.a]);
    expect(await queue().get(plain)).toBeNull();
    expect((await queue().get(flow.jobs.a))?.status).toBe('completed');
    expect((await flowDone(flow.id)).status).toBe('completed');
    expect(await runsOf(['zero-b'])).toEqual([{ tag: 'zero-b', n: 1 }]);
  });

  it('a live job of a flow deleted (a dashboard or CLI delete) counts as cancelled: its dependents end, the flow fails', async () => {
    const flow = await queue().enqueueFlow({ jobs: [{ ref: 'a', queue: 'fl-step', payload: { tag: 'del-a' }, delayMs: 3_600_000 }, { ref: 'b', queue: 'fl-step', payload: { tag: 'del-b' }, dependsOn: ['a'] }] });
    // The statement of the dashboard's and the CLI's delete.
    const deleted = await new AdminStore(t.db).bulkBatch('delete', { ids: [flow.jobs.a], statuses: ['queued'] }, '0', 100);
    expect(deleted.changed).toBe(1);
    const done = await flowDone(flow.id);
    expect(done.status).toBe('failed');
    expect(done.reason).toBe(`job ${flow.jobs.a} (a) was deleted`);
    expect(done.jobs.map((j) => [j.ref, j.status, j.lastError])).toEqual([['b', 'cancelled', `parent job ${flow.jobs.a} (a) was deleted`]]);
  });

  it("the sweeper unblocks a child whose last parent's worker died between its commit and its second look", async () => {
    const flow = await queue().enqueueFlow({ jobs: [{ ref: 'a', queue: 'fl-step', payload: { tag: 'net-a' }, delayMs: 3_600_000 }, { ref: 'b', queue: 'fl-step', payload: { tag: 'net-b' }, dependsOn: ['a'] }] });
    // What the race leaves: the parent completed and its edge resolved, the child still blocked (raw SQL runs no flow step).
    await t.db.query(`UPDATE background_jobs SET status = 'completed', finished_at = now() WHERE id = $1`, [flow.jobs.a]);
    await t.db.query(`UPDATE background_job_deps SET done = true WHERE parent_id = $1`, [flow.jobs.a]);
    // No worker settled anything, so no second look is coming: b stays blocked until the sweeper's pass.
    await claimReturned('fl-step');
    expect((await queue().get(flow.jobs.b))?.status).toBe('blocked');
    await t.app.get(MaintenanceScheduler).sweeper.runOnce();
    expect((await flowDone(flow.id)).status).toBe('completed');
    expect(await runsOf(['net-b'])).toEqual([{ tag: 'net-b', n: 1 }]);
  });

  it("the pruner deletes a flow's jobs together once the flow has finished past retention, never a parent of a running flow", async () => {
    const finished = await queue().enqueueFlow({ jobs: [{ ref: 'a', queue: 'fl-step', payload: { tag: 'pr-a' } }, { ref: 'b', queue: 'fl-step', payload: { tag: 'pr-b' }, dependsOn: ['a'] }] });
    expect((await flowDone(finished.id)).status).toBe('completed');
    const running = await queue().enqueueFlow({ jobs: [{ ref: 'a', queue: 'fl-step', payload: { tag: 'pr-ra' } }, { ref: 'b', queue: 'fl-step', payload: { tag: 'pr-rb' }, dependsOn: ['a'], delayMs: 3_600_000 }] });
    await waitFor('the running flow\'s parent to complete', async () => (await queue().get(running.jobs.a))?.status === 'completed');
    // Both flows' finished jobs (and the finished flow) are two days old: past the 1-day retention.
    await t.db.query(`UPDATE background_jobs SET finished_at = now() - interval '2 days' WHERE flow_id = ANY($1::int8[]) AND finished_at IS NOT NULL`, [[finished.id, running.id]]);
    await t.db.query(`UPDATE background_flows SET finished_at = now() - interval '2 days' WHERE id = $1`, [finished.id]);
    await t.app.get(MaintenanceScheduler).pruner.runOnce();
    expect(await queue().getFlow(finished.id)).toBeNull();
    expect((await t.db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE flow_id = $1`, [finished.id])).rows[0].n).toBe(0);
    expect((await t.db.query(`SELECT count(*)::int AS n FROM background_job_deps WHERE flow_id = $1`, [finished.id])).rows[0].n).toBe(0);
    expect((await queue().get(running.jobs.a))?.status).toBe('completed');
    await queue().cancelFlow(running.id);
  });

  it("emits one 'flow-finished' event per flow, with its final status, from the process that ran its jobs", async () => {
    const events: JobEvent[] = [];
    const stop = t.app.get(JobEvents).listen((e) => events.push(e), { names: ['flow-finished'] });
    try {
      const ok = await queue().enqueueFlow({ name: 'ev-ok', jobs: [{ ref: 'a', queue: 'fl-step', payload: { tag: 'ev-a' } }, { ref: 'b', queue: 'fl-step', payload: { tag: 'ev-b' }, dependsOn: ['a'] }] });
      const bad = await queue().enqueueFlow({
        name: 'ev-bad',
        jobs: [
          { ref: 'a', queue: 'fl-step', payload: { tag: 'ev-c' }, compensate: { queue: 'fl-undo', payload: { undo: 'ev-c' } } },
          { ref: 'b', queue: 'fl-step', payload: { tag: 'ev-d', fail: true }, dependsOn: ['a'] },
        ],
      });
      expect((await flowDone(ok.id)).status).toBe('completed');
      expect((await flowDone(bad.id)).status).toBe('compensated');
      await waitFor('both events', async () => events.length >= 2);
      // A third flow settled by the same worker afterwards: once its event is here, any other look at the first two
      // (second looks run one after another, in order) has been taken.
      const marker = await queue().enqueueFlow({ name: 'ev-marker', jobs: [{ ref: 'm', queue: 'fl-step', payload: { tag: 'ev-m' } }] });
      expect((await flowDone(marker.id)).status).toBe('completed');
      await waitFor('the marker flow’s event', async () => events.some((e) => e.flow?.id === marker.id));
      const seen = events.filter((e) => e.flow?.id !== marker.id).map((e) => ({ flow: e.flow, job: e.job.id }));
      expect(seen).toHaveLength(2);
      expect(events).toHaveLength(3);
      expect(seen.map((e) => e.flow)).toEqual(
        expect.arrayContaining([
          { id: ok.id, name: 'ev-ok', status: 'completed', reason: null },
          { id: bad.id, name: 'ev-bad', status: 'compensated', reason: `job ${bad.jobs.b} (b) failed` },
        ]),
      );
      // The job is one of that flow's, settled by this process: the first whose look after its settle found the flow
      // ended (the last job's, unless an earlier job's look ran after the flow had ended: CI saw job a announce it).
      const flowOf = new Map((await t.db.query(`SELECT id::text, flow_id::text FROM background_jobs WHERE flow_id = ANY($1::int8[])`, [[ok.id, bad.id]])).rows.map((r) => [r.id, r.flow_id]));
      for (const e of seen) expect(flowOf.get(e.job)).toBe(e.flow!.id);
      expect((await t.db.query(`SELECT bool_and(announced) AS all FROM background_flows WHERE id = ANY($1::int8[])`, [[ok.id, bad.id]])).rows[0].all).toBe(true);
    } finally {
      stop();
    }
  });

  it('a recurring schedule can start a flow on each fire', async () => {
    await queue().upsertSchedule({ name: 'flow-starter', cron: '* * * * * *', queue: 'fl-starter' });
    try {
      const started = await waitFor('a fire that started a flow', async () => {
        const { rows } = await t.db.query(`SELECT result FROM background_jobs WHERE queue_name = 'fl-starter' AND status = 'completed' LIMIT 1`);
        return rows[0]?.result?.flow as string | undefined;
      });
      expect((await flowDone(started)).status).toBe('completed');
    } finally {
      await queue().removeSchedule('flow-starter');
    }
  });
});

export type { FlowRecord };
