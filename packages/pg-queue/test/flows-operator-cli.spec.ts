import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplicationContext } from '@nestjs/common';
import { createTestDatabase } from '@internal/pg-harness';
import pg from 'pg';
import { QueueService } from 'nestjs-pg-queue';
import { buildCli, runCli } from './support/run-cli.js';
import { startApp } from './support/test-app.js';

// Issue 39, item 12, from the command line: `pg-queue jobs retry` of a job of a flow whose parent failed leaves it as
// it is and names the parent; retrying the parent brings it back blocked. The real binary against a real database;
// no workers run, so the jobs stay where the statements put them. Asserted from the tables.
describe('pg-queue jobs retry of flow jobs', () => {
  let url: string;
  let sql: pg.Pool;
  let app: INestApplicationContext;
  const cli = (...args: string[]) => runCli(args, { DATABASE_URL: url });
  const statuses = async (flowId: string) =>
    Object.fromEntries((await sql.query<{ ref: string; status: string }>('SELECT flow_ref AS ref, status::text FROM background_jobs WHERE flow_id = $1', [flowId])).rows.map((r) => [r.ref, r.status]));
  const flowStatus = async (flowId: string) => (await sql.query<{ status: string }>('SELECT status FROM background_flows WHERE id = $1', [flowId])).rows[0].status;

  beforeAll(async () => {
    await buildCli();
    url = await createTestDatabase('flows_ops_cli');
    sql = new pg.Pool({ connectionString: url, max: 2 });
    app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
  }, 180_000);
  afterAll(async () => {
    await app?.close();
    await sql?.end();
  });

  it('skips a job whose parent failed, naming the parent; a retry of the parent brings the job back blocked', async () => {
    const flow = await app.get(QueueService).enqueueFlow({
      jobs: [
        { ref: 'a', queue: 'ops-a', payload: {} },
        { ref: 'b', queue: 'ops-b', payload: {}, dependsOn: ['a'] },
      ],
    });
    // a fails for good by hand, then the flow step the queue's failure statement takes (raw SQL runs none).
    await sql.query(`UPDATE background_jobs SET status = 'failed', attempts = 1, finished_at = now(), last_error = 'boom' WHERE id = $1`, [flow.jobs.a]);
    await sql.query(`SELECT pg_queue_flow_step(id, flow_id, flow_ref, compensates, 'processing', 'failed') FROM background_jobs WHERE id = $1`, [flow.jobs.a]);
    expect(await statuses(flow.id)).toEqual({ a: 'failed', b: 'failed' });
    expect(await flowStatus(flow.id)).toBe('failed');

    const child = await cli('jobs', 'retry', flow.jobs.b, '--yes');
    expect(child.code).toBe(0);
    expect(child.stdout).toContain(`retried 0 job(s); 1 skipped: a parent of theirs has not completed or is gone (job ${flow.jobs.b} waits for parent job ${flow.jobs.a})`);
    expect(await statuses(flow.id)).toEqual({ a: 'failed', b: 'failed' });
    expect(await flowStatus(flow.id)).toBe('failed');

    const parent = await cli('jobs', 'retry', flow.jobs.a, '--yes');
    expect(parent.code).toBe(0);
    expect(parent.stdout).toContain('retried 1 job(s)');
    expect(await statuses(flow.id)).toEqual({ a: 'queued', b: 'blocked' });
    expect(await flowStatus(flow.id)).toBe('running');
  });
});
