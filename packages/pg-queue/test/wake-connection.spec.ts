import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { JobHandler } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { SQL } from '../src/store/job.sql.js';
import { JobStore } from '../src/store/job.store.js';
import { WakeConnection } from '../src/waking/wake-connection.js';
import { WakeSender } from '../src/waking/wake-sender.js';
import { TcpProxy } from './support/tcp-proxy.js';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

@Injectable()
class Idle {
  @JobHandler('woken')
  async run() {}
}

/** Every line the wake-up side logged. */
class Lines {
  readonly all: string[] = [];
  warn = (m: unknown) => void this.all.push(`warn ${String(m)}`);
  log = (m: unknown) => void this.all.push(`log ${String(m)}`);
  matching(pattern: RegExp): string[] {
    return this.all.filter((l) => pattern.test(l));
  }
}

// A wake-up connection that a NAT or load balancer dropped without a reset held every deferred wake-up of the
// process until its query timeout: jobs waited for the poll (enqueue-to-start 20 ms -> 29 s). And a server at
// max_connections cannot give the wake-ups a connection of their own at all. Either way the wake-ups must go
// out (on the queue's pool), and the jobs start at once, not at the workers' next poll (60 s here).
describe('the wake-up connection, dead or impossible to dial (issue 18 item 5)', () => {
  let url: string;
  let db: pg.Pool;
  let app: INestApplicationContext;
  const role = `waker_${randomBytes(4).toString('hex')}`;

  beforeAll(async () => {
    url = await createTestDatabase('wake-connection');
    db = sqlPool(url);
    // The wake-up connection's own role, allowed one connection: a dead flow whose backend lives on holds it, as a
    // server at max_connections holds every slot.
    await db.query(`CREATE ROLE ${role} LOGIN PASSWORD '${role}' CONNECTION LIMIT 1`);
    app = await startApp(url, { providers: [Idle], queue: { pollIntervalMs: 60_000, maintenance: { enabled: false } } });
  });
  afterAll(async () => {
    await app?.close();
    await db?.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, [role]).catch(() => undefined);
    await waitFor('the role’s backends gone', async () => (await db.query(`SELECT 1 FROM pg_stat_activity WHERE usename = $1`, [role])).rowCount === 0).catch(() => undefined);
    await db?.query(`DROP ROLE IF EXISTS ${role}`).catch(() => undefined);
    await db?.end();
  });

  /** A producer as the module makes one (a WakeSender over a WakeConnection), its wake-up connection through `proxyUrl`. */
  function producer(proxyUrl: string, liveness: { pingEveryMs: number; timeoutMs: number }) {
    const pool = new pg.Pool({ connectionString: url, max: 2 });
    const lines = new Lines();
    const sender = new WakeSender(new WakeConnection({ connectionString: proxyUrl, connectionTimeoutMillis: 5_000 }, new JobStore(pool), lines, liveness), lines);
    return {
      lines,
      /** An enqueue that leaves its wake-up to the sender (as concurrent QueueService enqueues do); the job's id. */
      async enqueue(): Promise<string> {
        const { rows } = await pool.query<{ id: string }>(SQL.insertJobWakeDeferred, ['woken', '{}', 0, 5, null, 0, null]);
        sender.wake(['woken']);
        await sender.flush();
        return rows[0].id;
      },
      async close() {
        await sender.close();
        await pool.end();
      },
    };
  }

  /** Enqueue-to-claim of the job by the database clock (created_at and locked_at are both its now()). */
  async function claimedAfterMs(id: string): Promise<number> {
    return waitFor(`job ${id} claimed`, async () => {
      const { rows } = await db.query<{ ms: number | null }>(`SELECT (extract(epoch FROM locked_at - created_at) * 1000)::float8 AS ms FROM background_jobs WHERE id = $1`, [id]);
      return rows[0]?.ms ?? undefined;
    }, 30_000);
  }

  function wakerUrl(): string {
    const u = new URL(url);
    u.username = role;
    u.password = role;
    return u.toString();
  }

  it('an idle ping finds the dead connection; while no new one can be dialled, wake-ups go out on the pool and jobs start at once', async () => {
    const proxy = await TcpProxy.start(wakerUrl());
    const p = producer(proxy.url, { pingEveryMs: 300, timeoutMs: 1_000 });
    try {
      expect(await claimedAfterMs(await p.enqueue())).toBeLessThan(1_000);
      expect(proxy.accepted).toBe(1);
      const [{ pid }] = (await db.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE usename = $1`, [role])).rows;

      proxy.blackHole(); // the flow is gone; the server's backend lives on, holding the role's one connection
      await waitFor('the ping to find the dead connection', async () => p.lines.matching(/wake-up connection .*was lost: .*ping took longer than 1000 ms/).length > 0, 5_000);

      // No wake-up connection can be made now (too many connections for the role): each wake-up goes out on the pool.
      const latencies = [];
      for (let i = 0; i < 4; i++) latencies.push(await claimedAfterMs(await p.enqueue()));
      expect(latencies.filter((ms) => ms >= 1_000)).toEqual([]);
      expect(p.lines.matching(/dialling the wake-up connection .* failed: (error: )?too many connections for role/)).toHaveLength(1); // once per outage
      expect(proxy.accepted).toBeGreaterThan(1); // it did try to dial

      // The dead backend goes (as TCP keepalive or an operator would end it): the next dial, after its backoff, works.
      await db.query(`SELECT pg_terminate_backend($1)`, [pid]);
      await waitFor('a new wake-up connection', async () => {
        expect(await claimedAfterMs(await p.enqueue())).toBeLessThan(1_000);
        return p.lines.matching(/dialling the wake-up connection .* recovered/).length > 0;
      }, 40_000, 200);
      const { rows } = await db.query(`SELECT application_name FROM pg_stat_activity WHERE usename = $1`, [role]);
      expect(rows).toEqual([{ application_name: 'nestjs-pg-queue wake-ups' }]);
    } finally {
      await p.close();
      await proxy.close();
    }
  }, 90_000);

  it('a wake-up on a connection that died since the last ping goes out on the pool once its NOTIFY times out; the next one dials anew', async () => {
    await db.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, [role]);
    await waitFor('the role’s slot free', async () => (await db.query(`SELECT 1 FROM pg_stat_activity WHERE usename = $1`, [role])).rowCount === 0);
    await db.query(`ALTER ROLE ${role} CONNECTION LIMIT -1`);
    const proxy = await TcpProxy.start(wakerUrl());
    const p = producer(proxy.url, { pingEveryMs: 60_000, timeoutMs: 1_000 });
    try {
      expect(await claimedAfterMs(await p.enqueue())).toBeLessThan(1_000);
      proxy.blackHole();
      const late = await claimedAfterMs(await p.enqueue());
      expect(late).toBeGreaterThanOrEqual(1_000); // the NOTIFY's timeout on the dead connection ...
      expect(late).toBeLessThan(3_000); // ... then at once on the pool: not the 60 s poll
      expect(p.lines.matching(/was lost: .*NOTIFY took longer than 1000 ms/)).toHaveLength(1);
      expect(await claimedAfterMs(await p.enqueue())).toBeLessThan(1_000);
      expect(proxy.accepted).toBe(2);
    } finally {
      await p.close();
      await proxy.close();
    }
  }, 60_000);
});
