import { Injectable } from '@nestjs/common';
import { afterAll, describe, expect, it } from '@jest/globals';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { JobStore } from '../src/internal.js';
import { useTestApp, waitFor } from './support/test-app.js';

/**
 * The fence is fence_token, which every claim increments and nothing else changes. attempts used to be the
 * fence, but retry() resets it and the shutdown put-back takes one off, so a late outcome of an older claim
 * could match the newer claim's attempt count. The refs below carry both the attempt and the token, so the
 * same test ran against the attempt-fenced store shows the old hole.
 */
const aborts = new Map<string, string[]>();
const gates = new Map<string, () => void>();

async function record(job: Job, event: string) {
  await t.db.query('INSERT INTO events (job_id, attempt, event) VALUES ($1, $2, $3)', [job.id, job.attempt, event]);
}

@Injectable()
class Handlers {
  @JobHandler('held', { maxAttempts: 5 })
  async held(job: Job) {
    await record(job, 'start');
    const key = `${job.id}/${(await t.db.query('SELECT count(*)::int AS n FROM events WHERE job_id = $1', [job.id])).rows[0].n}`;
    job.signal.addEventListener('abort', () => aborts.set(job.id, [...(aborts.get(job.id) ?? []), key]));
    await new Promise<void>((resolve) => gates.set(job.id, resolve));
    await record(job, 'end');
  }

  // Runs past two leases: only heartbeats keep it.
  @JobHandler('long', { maxAttempts: 5 })
  async long(job: Job) {
    await record(job, 'start');
    await new Promise((r) => setTimeout(r, 5_000));
    await record(job, 'end');
  }
}

const t = useTestApp(
  'fencing',
  { providers: [Handlers], queue: { leaseMs: 2_500, heartbeatMs: 1_000, maintenance: { sweepIntervalMs: 50 } } },
  (db) =>
    db.query(`
      CREATE TABLE events (job_id bigint, attempt int, event text, at timestamptz DEFAULT clock_timestamp());
      CREATE TABLE outage (until timestamptz NOT NULL);`),
);

/** A claim as the fenced statements name it, with the attempt too (what the attempt-fenced store read). */
type Claim = { id: string; token: string; attempt: number };

describe('fencing by a token that only grows', () => {
  afterAll(() => {
    for (const open of gates.values()) open();
  });

  it('a late completion of a claim before retry() does not complete the job claimed again', async () => {
    const store = t.app.get(JobStore);
    const queue = t.app.get(QueueService);
    const id = await queue.enqueue('manual-1', {});
    const [first] = (await store.claimJobs('manual-1', 1, 'w1', 60_000)).jobs as Claim[];
    expect(await queue.cancel(id)).toBe('cancelled');
    expect(await queue.retry(id)).toBe(true);
    const [second] = (await store.claimJobs('manual-1', 1, 'w1', 60_000)).jobs as Claim[];
    expect(second.attempt).toBe(first.attempt); // retry() started the count over
    expect(await store.completeJobs('w1', [first])).toEqual(new Set([id])); // refused
    expect(await store.failJobs('w1', [{ ...first, error: 'late', retryDelayMs: 0 }])).toEqual(new Map());
    expect(await store.extendLeases('w1', 60_000, [first])).toEqual(new Set());
    expect(await queue.get(id)).toMatchObject({ status: 'processing', attempts: 1, lastError: null });
    expect(await store.completeJobs('w1', [second])).toEqual(new Set());
    expect((await queue.get(id))!.status).toBe('completed');
  });

  it('a late outcome of a claim put back at shutdown does not land on the next claim', async () => {
    const store = t.app.get(JobStore);
    const queue = t.app.get(QueueService);
    const id = await queue.enqueue('manual-2', {});
    const [first] = (await store.claimJobs('manual-2', 1, 'w1', 60_000)).jobs as Claim[];
    expect(await store.releaseJobs('w1', [first])).toBe(1); // put back: attempts - 1
    const [second] = (await store.claimJobs('manual-2', 1, 'w1', 60_000)).jobs as Claim[];
    expect(second.attempt).toBe(first.attempt);
    expect(await store.completeJobs('w1', [first])).toEqual(new Set([id]));
    expect(BigInt(second.token)).toBeGreaterThan(BigInt(first.token));
    expect(await store.releaseJobs('w1', [first])).toBe(0);
    expect(await queue.get(id)).toMatchObject({ status: 'processing', attempts: 1 });
  });

  // completedRetentionMs: 0 completes by deleting the row (deleteCompletedJobs): a late completion that passed the
  // fence there would delete a job another claim is running, and nothing would be left to show it.
  it('with rows deleted on completion: a late completion (after retry() or a put-back) or another worker\'s deletes nothing', async () => {
    const store = t.app.get(JobStore);
    const queue = t.app.get(QueueService);
    const deleteRows = true;
    const id = await queue.enqueue('manual-3', {});
    const [first] = (await store.claimJobs('manual-3', 1, 'w1', 60_000)).jobs as Claim[];
    expect(await queue.cancel(id)).toBe('cancelled');
    expect(await queue.retry(id)).toBe(true);
    const [second] = (await store.claimJobs('manual-3', 1, 'w1', 60_000)).jobs as Claim[];
    expect(second.attempt).toBe(first.attempt);
    expect(await store.completeJobs('w1', [first], deleteRows)).toEqual(new Set([id])); // the earlier claim: refused
    expect(await store.completeJobs('w2', [second], deleteRows)).toEqual(new Set([id])); // another worker: refused
    expect(await queue.get(id)).toMatchObject({ status: 'processing', attempts: 1 });

    const put = await queue.enqueue('manual-3', {});
    const [before] = (await store.claimJobs('manual-3', 1, 'w1', 60_000)).jobs as Claim[];
    expect(await store.releaseJobs('w1', [before])).toBe(1);
    const [after] = (await store.claimJobs('manual-3', 1, 'w1', 60_000)).jobs as Claim[];
    expect(after.attempt).toBe(before.attempt);
    expect(await store.completeJobs('w1', [before], deleteRows)).toEqual(new Set([put]));
    expect(await queue.get(put)).toMatchObject({ status: 'processing', attempts: 1 });

    // The current claims delete their rows.
    expect(await store.completeJobs('w1', [second, after], deleteRows)).toEqual(new Set());
    expect(await queue.get(id)).toBeNull();
    expect(await queue.get(put)).toBeNull();
  });

  // A batch whose jobs all carry one token is fenced by that token alone; one with several looks each up (BATCH_FENCE).
  it.each([
    ['kept', false],
    ['deleted', true],
  ])('a batch settles each job against its own claim, with one token or several (completed rows %s)', async (_, deleteRows) => {
    const store = t.app.get(JobStore);
    const queue = t.app.get(QueueService);
    const name = `manual-batch-${deleteRows}`;
    const statusOf = async (id: string) => (await t.db.query('SELECT status, result FROM background_jobs_all WHERE id = $1', [id])).rows[0];
    const claimOne = async () => ((await store.claimJobs(name, 1, 'w1', 60_000)).jobs as Claim[])[0];
    const again = async (ref: Claim) => {
      expect(await store.releaseJobs('w1', [ref])).toBe(1);
      return claimOne();
    };

    // One token: a, b and c on their first claim; b was put back and claimed again since.
    const [a, b, c] = [await queue.enqueue(name, {}), await queue.enqueue(name, {}), await queue.enqueue(name, {})];
    const first = (await store.claimJobs(name, 3, 'w1', 60_000)).jobs as Claim[];
    expect(new Set(first.map((j) => j.token))).toEqual(new Set(['1']));
    const b2 = await again(first.find((j) => j.id === b)!);
    expect(b2.token).toBe('2');
    expect(await store.completeJobs('w1', first.map((j) => ({ ...j, resultJson: j.id === a ? '{"n":1}' : undefined })), deleteRows)).toEqual(new Set([b]));
    expect(await statusOf(b)).toMatchObject({ status: 'processing' });
    expect(await statusOf(a)).toEqual(deleteRows ? undefined : { status: 'completed', result: { n: 1 } });
    expect(await statusOf(c)).toEqual(deleteRows ? undefined : { status: 'completed', result: null });

    // Several tokens: b's current claim (2) beside d's first (1), and e's earlier claim (1), stale since e was claimed again.
    const d = await queue.enqueue(name, {});
    const d1 = await claimOne();
    const e = await queue.enqueue(name, {});
    const e1 = await claimOne();
    await again(e1);
    expect([b2.token, d1.token, e1.token]).toEqual(['2', '1', '1']);
    expect(await store.completeJobs('w1', [b2, { ...d1, resultJson: '"d"' }, e1], deleteRows)).toEqual(new Set([e]));
    expect(await statusOf(b)).toEqual(deleteRows ? undefined : { status: 'completed', result: null });
    expect(await statusOf(d)).toEqual(deleteRows ? undefined : { status: 'completed', result: 'd' });
    expect(await statusOf(e)).toMatchObject({ status: 'processing' });
  });

  it('a cancel notice of an earlier claim does not abort a later claim of the same job', async () => {
    const queue = t.app.get(QueueService);
    const listener = await t.db.connect();
    const notices: string[] = [];
    listener.on('notification', (n) => notices.push(n.payload!));
    await listener.query('LISTEN pg_queue_cancel');
    try {
      const id = await queue.enqueue('held', {});
      await waitFor('first run', async () => gates.has(id));
      expect(await queue.cancel(id)).toBe('cancelled');
      await waitFor('cancel notice', async () => notices.length === 1);
      await waitFor('first run aborted', async () => aborts.get(id)?.length === 1);
      gates.get(id)!();
      gates.delete(id);
      expect(await queue.retry(id)).toBe(true);
      await waitFor('second run', async () => gates.has(id));
      // The first claim's notice, delivered late (it raced the retry and the new claim): replayed as sent.
      await t.db.query(`SELECT pg_notify('pg_queue_cancel', $1)`, [notices[0]]);
      await new Promise((r) => setTimeout(r, 500));
      expect(aborts.get(id)).toEqual([`${id}/1`]);
      gates.get(id)!();
      await waitFor('second run completed', async () => (await queue.get(id))?.status === 'completed');
    } finally {
      listener.release();
    }
  });

  // Heartbeats fail for 2.05 s right after a beat: with leases of 2.5 s, the next beat must come within the
  // 0.45 s left after the outage. The old backoff (from heartbeatMs up to leaseMs) put it 1-2 s later.
  it('a heartbeat outage shorter than the lease costs no lease: the job runs once', async () => {
    await t.db.query(`
      CREATE FUNCTION refuse_heartbeat() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF EXISTS (SELECT 1 FROM outage WHERE until > clock_timestamp()) THEN RAISE EXCEPTION 'heartbeat outage (test)'; END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER refuse_heartbeat BEFORE UPDATE ON background_jobs FOR EACH ROW
        WHEN (OLD.status = 'processing' AND NEW.status = 'processing') EXECUTE FUNCTION refuse_heartbeat();`);
    try {
      const queue = t.app.get(QueueService);
      const id = await queue.enqueue('long', {});
      const lease = async () => (await t.db.query(`SELECT lease_expires_at FROM background_jobs WHERE id = $1`, [id])).rows[0]?.lease_expires_at?.getTime();
      const claimed = await waitFor('claimed', lease);
      await waitFor('a heartbeat', async () => ((await lease()) ?? 0) > claimed, 5_000, 10);
      await t.db.query(`INSERT INTO outage VALUES (now() + interval '2050 ms')`);
      await waitFor('completed', async () => (await queue.get(id))?.status === 'completed', 15_000);
      const { rows } = await t.db.query('SELECT attempt, event FROM events WHERE job_id = $1 ORDER BY at', [id]);
      expect(rows).toEqual([{ attempt: 1, event: 'start' }, { attempt: 1, event: 'end' }]);
      expect((await queue.get(id))!.lastError).toBeNull();
    } finally {
      await t.db.query('DROP TRIGGER refuse_heartbeat ON background_jobs; DROP FUNCTION refuse_heartbeat()');
    }
  }, 30_000);
});
