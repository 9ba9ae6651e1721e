import { Injectable } from '@nestjs/common';
import { describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { JobHandler, PgQueueError, QueueService, compareEventIds, type Job, type QueueEvent } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { MaintenanceScheduler } from '../src/internal.js';
import { useTestApp, waitFor } from './support/test-app.js';

// Issue 43, "A resumable event stream": the triggers record every state change of a recording queue's jobs, made by
// any path (worker outcomes, cancel, retry, the sweeper, flows, SQL), none of a queue that does not record; a
// consumer reads them in commit-safe order and resumes after the last id it saw.

@Injectable()
class Handlers {
  @JobHandler('ev-work', { concurrency: 4, maxAttempts: 2, backoff: () => 10 })
  async work(job: Job<{ fail?: 'once' | 'always' }>) {
    if (job.payload.fail === 'always' || (job.payload.fail === 'once' && job.attempt === 1)) throw new Error(`boom ${job.attempt}`);
  }

  @JobHandler('ev-quiet', { concurrency: 2 })
  async quiet() {}
}

describe('the resumable event stream (issue 43)', () => {
  const t = useTestApp('event_stream', {
    providers: [Handlers],
    queue: { maintenance: { sweepIntervalMs: 100, pruneIntervalMs: 3_600_000 } },
  });
  const service = () => t.app.get(QueueService);
  const typesOf = async (jobId: string) =>
    (await t.db.query<{ type: string }>(`SELECT type FROM background_job_events WHERE job_id = $1 ORDER BY tx, id`, [jobId])).rows.map((r) => r.type);
  const status = async (id: string) => (await t.db.query<{ status: string }>(`SELECT status::text FROM background_jobs WHERE id = $1`, [id])).rows[0]?.status;
  const settled = (id: string, want: string) => waitFor(`job ${id} ${want}`, async () => (await status(id)) === want);

  /** Reads events until `until` holds of what was read (or times out), then stops the iterator. */
  async function read(options: Parameters<QueueService['events']>[0], until: (seen: QueueEvent[]) => boolean, timeoutMs = 10_000): Promise<QueueEvent[]> {
    const seen: QueueEvent[] = [];
    const stop = new AbortController();
    const timer = setTimeout(() => stop.abort(), timeoutMs);
    try {
      for await (const event of service().events({ ...options, signal: stop.signal, pollIntervalMs: 50 })) {
        seen.push(event);
        if (until(seen)) break;
      }
    } finally {
      clearTimeout(timer);
    }
    return seen;
  }

  it('records nothing until a queue opts in, then only its own jobs', async () => {
    const before = await service().enqueue('ev-work', {}, { delayMs: 3_600_000 });
    expect(await service().recordEvents('ev-work')).toEqual(['ev-work']);
    expect(await service().promote(before)).toBe('changed');
    // Opting in again changes nothing (and rebuilds no trigger).
    expect(await service().recordEvents('ev-work')).toEqual(['ev-work']);
    const quiet = await service().enqueue('ev-quiet', {});
    await settled(quiet, 'completed');
    await settled(before, 'completed');
    expect(await typesOf(before)).toEqual(['started', 'completed']);
    expect((await t.db.query(`SELECT 1 FROM background_job_events WHERE queue_name = 'ev-quiet'`)).rowCount).toBe(0);
    const triggers = await t.db.query<{ tgname: string; def: string }>(
      `SELECT tgname, pg_get_triggerdef(oid) AS def FROM pg_trigger WHERE tgname LIKE '%events%' ORDER BY tgname`,
    );
    expect(triggers.rows.map((r) => r.tgname)).toEqual(['background_flows_events', 'background_jobs_events_delete', 'background_jobs_events_insert', 'background_jobs_events_update']);
    expect(triggers.rows[2].def).toContain(`'{ev-work}'::text[]`);
  });

  it("records each worker outcome: completed, failed then retrying, failed then dead", async () => {
    const ok = await service().enqueue('ev-work', {});
    const once = await service().enqueue('ev-work', { fail: 'once' });
    const always = await service().enqueue('ev-work', { fail: 'always' });
    await settled(ok, 'completed');
    await settled(once, 'completed');
    await settled(always, 'failed');
    expect(await typesOf(ok)).toEqual(['enqueued', 'started', 'completed']);
    expect(await typesOf(once)).toEqual(['enqueued', 'started', 'failed', 'retrying', 'started', 'completed']);
    expect(await typesOf(always)).toEqual(['enqueued', 'started', 'failed', 'retrying', 'started', 'failed', 'dead']);
    const dead = await t.db.query<{ attempt: number; detail: string }>(`SELECT attempt, detail FROM background_job_events WHERE job_id = $1 AND type = 'dead'`, [always]);
    expect(dead.rows).toEqual([{ attempt: 2, detail: expect.stringContaining('boom 2') }]);
  });

  it('records cancel, retry (enqueued again), SQL enqueues and the sweeper taking back an expired lease', async () => {
    const later = await service().enqueue('ev-work', {}, { delayMs: 3_600_000 });
    expect(await service().cancel(later)).toBe('cancelled');
    expect(await typesOf(later)).toEqual(['enqueued', 'cancelled']);
    expect(await service().retry(later)).toBe(true);
    await settled(later, 'completed');
    expect(await typesOf(later)).toEqual(['enqueued', 'cancelled', 'enqueued', 'started', 'completed']);

    const { rows } = await t.db.query<{ id: string }>(`INSERT INTO background_jobs (queue_name, run_at) VALUES ('ev-work', now() + interval '1 hour') RETURNING id::text`);
    const fromSql = rows[0].id;
    // A worker that took the job and died: its lease expired. The sweeper puts it back, the worker runs it.
    await t.db.query(
      `UPDATE background_jobs SET status = 'processing', attempts = 1, locked_by = 'gone', locked_at = now(), lease_expires_at = now() - interval '1 s', run_at = now() WHERE id = $1`,
      [fromSql],
    );
    await settled(fromSql, 'completed');
    expect(await typesOf(fromSql)).toEqual(['enqueued', 'started', 'stalled', 'started', 'completed']);
    const stalled = await t.db.query<{ detail: string }>(`SELECT detail FROM background_job_events WHERE job_id = $1 AND type = 'stalled'`, [fromSql]);
    expect(stalled.rows[0].detail).toMatch(/^lease expired: worker gone/);
  });

  it("records flow-finished with the flow's final status", async () => {
    const flow = await service().enqueueFlow({
      name: 'ev-flow',
      jobs: [
        { ref: 'a', queue: 'ev-work', payload: {} },
        { ref: 'b', queue: 'ev-work', payload: {}, dependsOn: ['a'] },
      ],
    });
    await waitFor('the flow-finished event', async () =>
      (await t.db.query(`SELECT 1 FROM background_job_events WHERE type = 'flow-finished' AND flow_id = $1`, [flow.id])).rowCount === 1,
    );
    const { rows } = await t.db.query(`SELECT queue_name, detail, job_id FROM background_job_events WHERE type = 'flow-finished' AND flow_id = $1`, [flow.id]);
    expect(rows).toEqual([{ queue_name: 'ev-work', detail: 'completed', job_id: null }]);
  });

  it('a consumer reads in order, and one that stops resumes after the last id it saw: no gap, no duplicate', async () => {
    const head = await read({ after: '0-0' }, () => false, 1_500);
    const all = (await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_job_events`)).rows[0].n;
    expect(head).toHaveLength(all);
    for (let i = 1; i < head.length; i++) expect(compareEventIds(head[i - 1].id, head[i].id)).toBeLessThan(0);

    const ids = await Promise.all(Array.from({ length: 30 }, () => service().enqueue('ev-work', {})));
    await Promise.all(ids.map((id) => settled(id, 'completed')));
    const mine = (e: QueueEvent) => e.jobId !== null && ids.includes(e.jobId);
    // The first consumer stops after 20 of the new jobs' events; the next one starts after the last it saw.
    const first = await read({ after: head.at(-1)!.id, pageSize: 7 }, (seen) => seen.filter(mine).length >= 20);
    const second = await read({ after: first.at(-1)!.id, queues: ['ev-work'] }, (seen) => seen.filter(mine).length >= 70);
    const both = [...first, ...second].filter(mine);
    expect(both).toHaveLength(90); // enqueued, started, completed for each of 30
    expect(new Set(both.map((e) => e.id)).size).toBe(90);
    for (const id of ids) expect(both.filter((e) => e.jobId === id).map((e) => e.type)).toEqual(['enqueued', 'started', 'completed']);
  });

  it('filters by type, and checks its options when called', async () => {
    const id = await service().enqueue('ev-work', { fail: 'always' });
    await settled(id, 'failed');
    const dead = await read({ after: '0-0', types: ['dead'] }, (seen) => seen.some((e) => e.jobId === id));
    expect(dead.every((e) => e.type === 'dead')).toBe(true);
    expect(() => service().events({ after: '12' })).toThrow(PgQueueError);
    // Past xid8's or bigint's range: refused at the call, not by the database's cast at every read of the loop.
    expect(() => service().events({ after: '18446744073709551616-1' })).toThrow(/after=/);
    expect(() => service().events({ after: '1-9223372036854775808' })).toThrow(/after=/);
    expect(() => service().events({ after: '18446744073709551615-9223372036854775807' })).not.toThrow();
    expect(() => service().events({ types: ['done' as never] })).toThrow(/types="done"/);
    expect(() => service().events({ pageSize: 0 })).toThrow(/pageSize/);
    expect(() => service().events({ queues: ['bad name'] })).toThrow(PgQueueError);
  });

  it('never skips an event whose transaction commits after a younger one (ids taken out of commit order)', async () => {
    const older = new pg.Client({ connectionString: t.url });
    const younger = new pg.Client({ connectionString: t.url });
    await older.connect();
    await younger.connect();
    try {
      const stop = new AbortController();
      const seen: QueueEvent[] = [];
      await service().recordEvents('ev-sql');
      const reading = (async () => {
        for await (const e of service().events({ after: '0-0', queues: ['ev-sql'], signal: stop.signal, pollIntervalMs: 50 })) seen.push(e);
      })();
      // `older` inserts first (the smaller event id) and commits last.
      const insert = async (c: pg.Client) =>
        (await c.query<{ id: string }>(`INSERT INTO background_jobs (queue_name, run_at) VALUES ('ev-sql', now() + interval '1 h') RETURNING id::text`)).rows[0].id;
      await older.query('BEGIN');
      const o = await insert(older);
      await younger.query('BEGIN');
      const y = await insert(younger);
      await younger.query('COMMIT');
      // Committed so far: the younger's event only, with the larger id. A reader by id alone would hand it out and
      // move past the older's id, which commits below.
      const visible = (await t.db.query<{ job_id: string }>(`SELECT job_id::text FROM background_job_events WHERE queue_name = 'ev-sql'`)).rows;
      expect(visible).toEqual([{ job_id: y }]);
      await new Promise((r) => setTimeout(r, 400));
      expect(seen).toEqual([]); // held back while an older transaction is open
      await older.query('COMMIT');
      await waitFor('both events', async () => seen.length === 2);
      expect(seen.map((e) => e.jobId)).toEqual([o, y]);
      const byId = (await t.db.query<{ job_id: string }>(`SELECT job_id::text FROM background_job_events WHERE queue_name = 'ev-sql' ORDER BY id`)).rows;
      expect(byId.map((r) => r.job_id)).toEqual([o, y]);
      stop.abort();
      await reading;
    } finally {
      await older.end();
      await younger.end();
      await service().recordEvents('ev-sql', false);
    }
  });

  it("hands out one job's events in the order of its changes when the later change has the older transaction", async () => {
    // The simulation's seed 63: a flow's failure took its xid on the flow's row, a snoozed step went back to queued
    // (`returned`) and committed, then the failure cancelled the step. With each event at its writer's own xid the
    // stream gave `cancelled` before `returned`. Here: `older` takes its xid, `younger` cancels the job and commits,
    // then `older` queues it again (a retry: `enqueued`).
    const older = new pg.Client({ connectionString: t.url });
    const younger = new pg.Client({ connectionString: t.url });
    await older.connect();
    await younger.connect();
    try {
      await service().recordEvents('ev-sql');
      const job = (await t.db.query<{ id: string }>(`INSERT INTO background_jobs (queue_name, run_at) VALUES ('ev-sql', now() + interval '1 h') RETURNING id::text`)).rows[0].id;
      await older.query('BEGIN');
      const olderXid = (await older.query<{ x: string }>(`SELECT pg_current_xact_id()::text AS x`)).rows[0].x;
      await younger.query('BEGIN');
      await younger.query(`UPDATE background_jobs SET status = 'cancelled' WHERE id = $1`, [job]);
      const youngerXid = (await younger.query<{ x: string }>(`SELECT pg_current_xact_id()::text AS x`)).rows[0].x;
      await younger.query('COMMIT');
      expect(BigInt(olderXid)).toBeLessThan(BigInt(youngerXid));
      await older.query(`UPDATE background_jobs SET status = 'queued', finished_at = NULL WHERE id = $1`, [job]);
      await older.query('COMMIT');

      expect(await typesOf(job)).toEqual(['enqueued', 'cancelled', 'enqueued']);
      const seen = await read({ after: '0-0', queues: ['ev-sql'] }, (s) => s.filter((e) => e.jobId === job).length === 3);
      expect(seen.filter((e) => e.jobId === job).map((e) => e.type)).toEqual(['enqueued', 'cancelled', 'enqueued']);
      // Never below its writer's own xid (the stream's rule: a reader never hands out a place an open transaction can still write below).
      const { rows } = await t.db.query<{ below: number }>(`SELECT count(*)::int AS below FROM background_job_events WHERE job_id = $1 AND type = 'enqueued' AND tx < $2::xid8`, [job, youngerXid]);
      expect(rows[0].below).toBe(1); // the insert's, only
    } finally {
      await older.end();
      await younger.end();
      await service().recordEvents('ev-sql', false);
    }
  });

  it("keeps a job's events in the order of its changes when a statement run inside the changing one changes it again", async () => {
    // The simulation's seed 981738550: a failure batch retried job B (failed, retrying) and, from the same
    // statement's final SELECT, the flow step of job A failed their flow and cancelled B. The cancel's triggers fired
    // when its own statement ended, before the batch's, so the stream ended with `retrying` for a cancelled job.
    // Here the same shape: a CTE charges the attempt and queues the job again, and the final SELECT calls a function
    // (as stepFlows calls pg_queue_flow_step) that cancels it.
    await service().recordEvents('ev-sql');
    await t.db.query(`CREATE OR REPLACE FUNCTION test_cancel_job(jid bigint) RETURNS boolean LANGUAGE plpgsql AS $$
      BEGIN UPDATE background_jobs SET status = 'cancelled', finished_at = now() WHERE id = jid AND status = 'queued'; RETURN FOUND; END $$`);
    try {
      const job = (await t.db.query<{ id: string }>(`INSERT INTO background_jobs (queue_name, status, attempts, locked_at, lease_expires_at, locked_by)
        VALUES ('ev-sql', 'processing', 1, now(), now() + interval '1 min', 'w') RETURNING id::text`)).rows[0].id;
      const { rows } = await t.db.query<{ cancelled: boolean }>(
        `WITH failed AS (
           UPDATE background_jobs SET status = 'queued', last_error = 'boom', locked_by = NULL, locked_at = NULL, lease_expires_at = NULL
           WHERE id = $1 RETURNING id
         )
         SELECT test_cancel_job(w.id) AS cancelled FROM (SELECT * FROM failed ORDER BY id) AS w`,
        [job],
      );
      expect(rows).toEqual([{ cancelled: true }]);
      expect(await status(job)).toBe('cancelled');
      expect(await typesOf(job)).toEqual(['enqueued', 'started', 'failed', 'retrying', 'cancelled']);
      const seen = await read({ after: '0-0', queues: ['ev-sql'] }, (s) => s.filter((e) => e.jobId === job).length === 5);
      expect(seen.filter((e) => e.jobId === job).map((e) => e.type)).toEqual(['enqueued', 'started', 'failed', 'retrying', 'cancelled']);
      // A change in a later statement of the same transaction is not moved: its events follow in their own place.
      const again = (await t.db.query<{ id: string }>(`INSERT INTO background_jobs (queue_name) VALUES ('ev-sql') RETURNING id::text`)).rows[0].id;
      const c = await t.db.connect();
      try {
        await c.query('BEGIN');
        await c.query(`UPDATE background_jobs SET status = 'cancelled', finished_at = now() WHERE id = $1`, [again]);
        await c.query(`UPDATE background_jobs SET status = 'queued', finished_at = NULL WHERE id = $1`, [again]);
        await c.query('COMMIT');
      } finally {
        c.release();
      }
      expect(await typesOf(again)).toEqual(['enqueued', 'cancelled', 'enqueued']);
    } finally {
      await t.db.query(`DROP FUNCTION test_cancel_job(bigint)`);
      await service().recordEvents('ev-sql', false);
    }
  });

  it('hands out events while a transaction of another database of the same server is open', async () => {
    // CI, 2026-12-07: `pg-queue events` printed nothing while a test of another database held a transaction open,
    // because the reader's horizon was its snapshot's xmin, which every database's transactions hold back.
    const other = new pg.Client({ connectionString: await createTestDatabase('event_stream_other') });
    const same = new pg.Client({ connectionString: t.url });
    await other.connect();
    await same.connect();
    try {
      await service().recordEvents('ev-sql');
      await other.query('BEGIN');
      await other.query('SELECT pg_current_xact_id()');
      const job = (await t.db.query<{ id: string }>(`INSERT INTO background_jobs (queue_name, run_at) VALUES ('ev-sql', now() + interval '1 h') RETURNING id::text`)).rows[0].id;
      const seen = await read({ after: '0-0', queues: ['ev-sql'] }, (s) => s.some((e) => e.jobId === job));
      expect(seen.filter((e) => e.jobId === job).map((e) => e.type)).toEqual(['enqueued']);
      // One of this database still holds events back (the stream's rule), the other database's notwithstanding.
      await same.query('BEGIN');
      await same.query('SELECT pg_current_xact_id()');
      const held = (await t.db.query<{ id: string }>(`INSERT INTO background_jobs (queue_name, run_at) VALUES ('ev-sql', now() + interval '1 h') RETURNING id::text`)).rows[0].id;
      const early = await read({ after: '0-0', queues: ['ev-sql'] }, () => false, 500);
      expect(early.some((e) => e.jobId === held)).toBe(false);
      await same.query('COMMIT');
      const later = await read({ after: '0-0', queues: ['ev-sql'] }, (s) => s.some((e) => e.jobId === held));
      expect(later.some((e) => e.jobId === held)).toBe(true);
      await other.query('COMMIT');
    } finally {
      await other.end();
      await same.end();
      await service().recordEvents('ev-sql', false);
    }
  });

  it('opting every queue out drops the triggers: no cost and no events', async () => {
    expect(await service().recordEvents('ev-work', false)).toEqual([]);
    expect((await t.db.query(`SELECT 1 FROM pg_trigger WHERE tgname LIKE '%events%'`)).rowCount).toBe(0);
    const id = await service().enqueue('ev-work', {});
    await settled(id, 'completed');
    expect(await typesOf(id)).toEqual([]);
  });

  it('the pruner deletes events past eventRetentionMs', async () => {
    await t.db.query(`UPDATE background_job_events SET created_at = now() - interval '8 days' WHERE id IN (SELECT id FROM background_job_events ORDER BY id LIMIT 5)`);
    const { Pruner } = await import('../src/maintenance/pruner.js');
    const { JobStore } = await import('../src/store/job.store.js');
    const pool = new pg.Pool({ connectionString: t.url, max: 2 });
    try {
      const pruner = new Pruner(new JobStore(pool), { completedRetentionMs: 86_400_000, failedRetentionMs: null, eventRetentionMs: 7 * 86_400_000, batchSize: 2, maxBatchesPerPass: 10 }, console);
      expect(await pruner.pruneEvents()).toBe(5);
      expect((await t.db.query(`SELECT 1 FROM background_job_events WHERE created_at < now() - interval '7 days'`)).rowCount).toBe(0);
    } finally {
      await pool.end();
    }
  });
});

describe('the event stream with completedRetentionMs: 0', () => {
  const t = useTestApp('event_stream_zero', { providers: [Handlers], queue: { maintenance: { enabled: false, completedRetentionMs: 0 } } });

  it('a completion that deletes its job records started and completed, as one that keeps it does', async () => {
    const service = t.app.get(QueueService);
    await service.recordEvents('ev-work');
    const ids = await service.enqueueMany([{ queue: 'ev-work', payload: {} }, { queue: 'ev-work', payload: {} }]);
    const gone = async () => (await t.db.query(`SELECT 1 FROM background_jobs WHERE id = ANY($1::int8[])`, [ids])).rowCount === 0;
    await waitFor('both completed and deleted', gone);
    const { rows } = await t.db.query<{ job_id: string; type: string; attempt: number }>(
      `SELECT job_id::text, type, attempt FROM background_job_events WHERE job_id = ANY($1::int8[]) ORDER BY tx, id`,
      [ids],
    );
    for (const id of ids) {
      expect(rows.filter((r) => r.job_id === id).map((r) => [r.type, r.attempt])).toEqual([['enqueued', 0], ['started', 1], ['completed', 1]]);
    }
  });
});

describe('the event stream with partitioned history', () => {
  const t = useTestApp('event_stream_history', {
    providers: [Handlers],
    queue: { maintenance: { enabled: false, history: { partitionWidth: 'hour', moveAfterMs: 0 } } },
  });

  it('a job history gives back records no event of its own: a retry of it records enqueued once, then its run', async () => {
    // Found by the simulation (seed 1869304768 with partitioned history): the bring-back's insert was taken for an
    // enqueue, and a bulk retry that refused a job (its parent failed) brought it back on every run.
    const service = t.app.get(QueueService);
    await service.recordEvents('ev-work');
    const id = await service.enqueue('ev-work', { fail: 'always' });
    const finished = async (want: string) =>
      (await t.db.query(`SELECT status::text FROM background_jobs_all WHERE id = $1`, [id])).rows[0]?.status === want;
    await waitFor('the job dead-lettered', () => finished('failed'));
    const mover = t.app.get(MaintenanceScheduler).historyMover!;
    await mover.runOnce();
    expect((await t.db.query(`SELECT 1 FROM background_jobs_history WHERE id = $1`, [id])).rowCount).toBe(1);
    await t.db.query(`UPDATE background_jobs_history SET payload = '{}' WHERE id = $1`, [id]);
    expect(await service.retry(id)).toBe(true);
    await waitFor('the retried job completed', () => finished('completed'));
    const { rows } = await t.db.query<{ type: string; attempt: number }>(`SELECT type, attempt FROM background_job_events WHERE job_id = $1 ORDER BY tx, id`, [id]);
    expect(rows.map((r) => r.type)).toEqual(['enqueued', 'started', 'failed', 'retrying', 'started', 'failed', 'dead', 'enqueued', 'started', 'completed']);
  });
});
