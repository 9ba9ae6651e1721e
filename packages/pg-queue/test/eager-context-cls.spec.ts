import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { createTestDatabase } from '@internal/pg-harness';
import { buildWorker, type WorkerBuild } from './faults/support/build-worker.js';
import { forkLoaded, startForked } from './support/serve-start.js';
import { sqlPool, waitFor } from './support/test-app.js';

// Issue 39 item 6 with nestjs-cls and @nestjs-cls/transactional (ambientTransactions off): an enqueue inside a
// @Transactional() call of a request starts its job eagerly, while the call's transaction is open. The handler
// writes through `txHost.tx`. It used to run in the request's CLS context: its write joined the request's
// transaction and went with its rollback while the job stayed completed, and it saw and changed the request's
// store. The app runs as its own process (transactions/eager-cls-app.ts says why); the tables say what happened.

type Answer = { id?: string; user: string; error?: string };

describe('eager start inside a @nestjs-cls/transactional call (issue 39 item 6)', () => {
  let url: string;
  let db: pg.Pool;
  let build: WorkerBuild;
  let child: ChildProcess;
  let next = 0;

  const call = (email: string, fail: boolean): Promise<Answer> =>
    new Promise((resolve, reject) => {
      const id = ++next;
      const answer = (m: { type: string; id: number; value?: Answer; error?: string }) => {
        if (m.type !== 'answer' || m.id !== id) return;
        child.off('message', answer);
        if (m.error !== undefined) reject(new Error(m.error));
        else resolve(m.value!);
      };
      child.on('message', answer);
      child.send({ type: 'call', id, email, fail });
    });

  beforeAll(async () => {
    url = await createTestDatabase('eager-cls');
    db = sqlPool(url);
    await db.query(`CREATE TABLE eager_orders (email text)`);
    await db.query(`CREATE TABLE eager_audit (job_id bigint, email text, cls_active boolean, cls_user text)`);
    build = await buildWorker([fileURLToPath(new URL('./transactions/eager-cls-app.ts', import.meta.url))]);
    child = await forkLoaded(build.script);
    await startForked(child, { url });
    // How each job row was inserted: 'processing' is an eager start.
    await db.query(`CREATE TABLE eager_inserted (job_id bigint, status text)`);
    await db.query(`CREATE FUNCTION eager_log() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO eager_inserted VALUES (NEW.id, NEW.status::text); RETURN NEW; END $$`);
    await db.query(`CREATE TRIGGER eager_log AFTER INSERT ON background_jobs FOR EACH ROW EXECUTE FUNCTION eager_log()`);
    // The worker's first claim has come back: the next enqueue finds it idle.
    await call('warm-up', false);
  }, 120_000);
  afterAll(async () => {
    child?.kill('SIGKILL');
    await build?.remove();
    await db?.end();
  });

  const one = async <T extends object>(sql: string, values: unknown[]) => (await db.query<T & object>(sql, values)).rows[0];
  const count = async (sql: string, values: unknown[]) => (await db.query<{ n: number }>(sql, values)).rows[0].n;

  it('the request rolls back: its order goes, the job’s own write stays with the job completed; the handler saw no CLS context and left the request’s store alone', async () => {
    const answer = await call('rolled-back', true);
    expect(answer.error).toBe('payment declined');
    const id = answer.id!;
    await waitFor('the job completed', async () => (await one<{ status: string }>(`SELECT status FROM background_jobs WHERE id = $1`, [id]))?.status === 'completed');
    expect(await one(`SELECT status FROM eager_inserted WHERE job_id = $1`, [id])).toEqual({ status: 'processing' });
    expect(await count(`SELECT count(*)::int AS n FROM eager_orders WHERE email = 'rolled-back'`, [])).toBe(0);
    // The handler's write committed on its own, as the job did: not rolled back with the request.
    expect(await one(`SELECT email, cls_active, cls_user FROM eager_audit WHERE job_id = $1`, [id])).toEqual({ email: 'rolled-back', cls_active: false, cls_user: null });
    expect(answer.user).toBe('alice');
  });

  it('the request commits: both writes are there, each in its own transaction', async () => {
    const answer = await call('committed', false);
    expect(answer.error).toBeUndefined();
    const id = answer.id!;
    await waitFor('the job completed', async () => (await one<{ status: string }>(`SELECT status FROM background_jobs WHERE id = $1`, [id]))?.status === 'completed');
    expect(await one(`SELECT status FROM eager_inserted WHERE job_id = $1`, [id])).toEqual({ status: 'processing' });
    expect(await count(`SELECT count(*)::int AS n FROM eager_orders WHERE email = 'committed'`, [])).toBe(1);
    expect(await one(`SELECT cls_active, cls_user FROM eager_audit WHERE job_id = $1`, [id])).toEqual({ cls_active: false, cls_user: null });
    expect(answer.user).toBe('alice');
  });
});
