import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { PgQueueModule, QueueService } from 'nestjs-pg-queue';
import { PgQueueDashboardModule } from 'nestjs-pg-queue/dashboard';
import { createTestDatabase } from '@internal/pg-harness';
import { Connection } from '../src/cli/connection.js';
import { PgQueueConnection } from '../src/connection/pg-queue-connection.js';
import { DashboardStore } from '../src/store/dashboard.store.js';
import { POOL_ROLES } from '../src/connection/pg-client-config.js';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

// A client checked out of one of the queue's pools, its connection lost between two of its statements (PostgreSQL
// restarted, pg_terminate_backend): pg emits 'error' on the client with no query to take it, and with no listener
// that would be an uncaught exception in the host (the simulation's seed 287818724 lost a process so, at a restart,
// from a client it could not name). Every client of every pool the library opens (the queue's, the dashboard's, the
// CLI's) listens from its first connect (guardPool, where each pool is made).

let app: INestApplicationContext;
let db: pg.Pool;
let url: string;

beforeAll(async () => {
  url = await createTestDatabase('checked_out_client_errors');
  db = sqlPool(url);
  app = await startApp(url, {
    imports: [PgQueueModule.forRoot({ connection: url, workers: false, maintenance: { enabled: false } }), PgQueueDashboardModule.forRoot({ path: 'queues', public: true })],
  });
});

afterAll(async () => {
  await app?.close();
  await db?.end();
});

/** Checks a client out of `pool`, has the server end its connection, and checks the client and the pool after. */
async function loseCheckedOutClient(pool: pg.Pool): Promise<void> {
  const client = await pool.connect();
  const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  const { rows: killed } = await db.query<{ ok: boolean }>('SELECT pg_terminate_backend($1) AS ok', [rows[0].pid]);
  expect(killed[0].ok).toBe(true);
  // The server's "terminating connection" reaches the idle client (an unhandled 'error' would fail this spec here).
  await waitFor('the backend to be gone', async () => (await db.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [rows[0].pid])).rowCount === 0);
  await new Promise((resolve) => setTimeout(resolve, 200));
  await expect(client.query('SELECT 1')).rejects.toThrow();
  client.release(new Error('lost'));
  expect((await pool.query<{ one: number }>('SELECT 1 AS one')).rows[0].one).toBe(1);
}

describe("the library's pools: a checked-out client whose connection is lost", () => {
  it.each(POOL_ROLES)("the queue's %s pool: the host does not crash, the client answers its next query with the error, and the pool goes on", async (role) => {
    await loseCheckedOutClient(app.get(PgQueueConnection).pools[role]);
  });

  it("the dashboard's pool", async () => {
    await loseCheckedOutClient((app.get(DashboardStore, { strict: false }) as unknown as { pool: pg.Pool }).pool);
  });

  it("the command line's pool", async () => {
    const connection = new Connection(url, false);
    try {
      await loseCheckedOutClient(connection.getPool());
    } finally {
      await connection.close();
    }
  });

  it('the app goes on enqueueing', async () => {
    const id = await app.get(QueueService).enqueue('after_loss', { ok: true });
    expect((await db.query('SELECT status::text FROM background_jobs WHERE id = $1', [id])).rows[0]).toEqual({ status: 'queued' });
  });
});
