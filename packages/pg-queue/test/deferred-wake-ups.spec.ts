import { Module, type INestApplicationContext, type LoggerService } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { DataSource, type QueryRunner } from 'typeorm';
import { DeferredWakeUps1764590000000, PgQueueModule, QueueService } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { JOBS_CHANNEL } from '../src/pg-queue.constants.js';
import { SQL } from '../src/store/job.sql.js';
import { WakeSender } from '../src/waking/wake-sender.js';
import { sqlPool, waitFor } from './support/test-app.js';

/** Keeps every log line, to assert on what the module said. */
class RecordingLogger implements LoggerService {
  readonly lines: { level: string; message: string }[] = [];
  log(message: unknown) { this.lines.push({ level: 'log', message: String(message) }); }
  error(message: unknown, ...rest: unknown[]) { this.lines.push({ level: 'error', message: [message, ...rest].map(String).join(' ') }); }
  warn(message: unknown) { this.lines.push({ level: 'warn', message: String(message) }); }
  debug() {}
  verbose() {}
}

/**
 * Every notice on the workers' channel, with the backend that sent it. `settle()` sends a marker from a
 * connection of its own and waits for it: notices are delivered in commit order, so every notice committed
 * before the marker has arrived by then (no sleeping to prove that nothing more comes).
 */
class NoticeLog {
  readonly notices: { queue: string; pid: number }[] = [];
  private markers = 0;

  private constructor(
    private readonly listener: pg.Client,
    private readonly db: pg.Pool,
  ) {
    listener.on('notification', (n) => this.notices.push({ queue: n.payload ?? '', pid: n.processId }));
  }

  static async listen(url: string, db: pg.Pool): Promise<NoticeLog> {
    const listener = new pg.Client({ connectionString: url });
    await listener.connect();
    await listener.query(`LISTEN ${JOBS_CHANNEL}`);
    return new NoticeLog(listener, db);
  }

  async settle(): Promise<void> {
    const marker = `marker-${++this.markers}`;
    await this.db.query(`SELECT pg_notify($1, $2)`, [JOBS_CHANNEL, marker]);
    await waitFor(marker, async () => this.notices.some((n) => n.queue === marker), 10_000, 5);
  }

  of(queue: string): { queue: string; pid: number }[] {
    return this.notices.filter((n) => n.queue === queue);
  }

  close(): Promise<void> {
    return this.listener.end();
  }
}

async function startRecorded(url: string): Promise<{ app: INestApplicationContext; logger: RecordingLogger }> {
  @Module({ imports: [PgQueueModule.forRoot({ connection: url, workers: false, maintenance: { enabled: false }, recurring: { enabled: false } })] })
  class ProducerModule {}
  const logger = new RecordingLogger();
  const app = await NestFactory.createApplicationContext(ProducerModule, { logger, abortOnError: false });
  await app.init();
  return { app, logger };
}

/** The pid of the wake sender's backend once it has one (it connects on the first wake-up). */
async function wakerPid(db: pg.Pool): Promise<number | undefined> {
  const { rows } = await db.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE application_name = 'nestjs-pg-queue wake-ups' AND datname = current_database()`);
  return rows[0]?.pid;
}

// The producer side of the wake-up, as the database sees it: which backend sent each NOTIFY, and how many.
describe('deferred wake-ups: who notifies the workers after an enqueue', () => {
  let url: string;
  let db: pg.Pool;
  let app: INestApplicationContext;
  let logger: RecordingLogger;
  let notices: NoticeLog;
  let queue: QueueService;
  let dataSource: DataSource;

  beforeAll(async () => {
    url = await createTestDatabase('deferred_wake');
    db = sqlPool(url);
    ({ app, logger } = await startRecorded(url));
    queue = app.get(QueueService);
    notices = await NoticeLog.listen(url, db);
    dataSource = new DataSource({ type: 'postgres', url, extra: { max: 2 } });
    await dataSource.initialize();
  });
  afterAll(async () => {
    await app?.close();
    await notices?.close();
    await dataSource?.destroy();
    await db?.end();
  });

  async function enqueued(work: () => Promise<unknown>): Promise<void> {
    await work();
    await app.get(WakeSender).flush();
    await notices.settle();
  }

  /** Runs `work` as if another enqueue of this process were in flight: every enqueue in it defers its wake-up. */
  async function deferring(work: () => Promise<unknown>): Promise<void> {
    const wakes = app.get(WakeSender);
    wakes.begin();
    try {
      await enqueued(work);
    } finally {
      wakes.end();
    }
  }

  it('a lone enqueue keeps the trigger’s notice; concurrent ones leave theirs to the wake sender, after their commit', async () => {
    await enqueued(() => queue.enqueue('lone', {}));
    const [lone] = notices.of('lone');
    expect(lone).toBeDefined();
    expect(notices.of('lone')).toHaveLength(1);
    expect(lone.pid).not.toBe(await wakerPid(db)); // the insert's own backend (no wake-up connection yet)

    await enqueued(() => Promise.all(Array.from({ length: 8 }, (_, i) => queue.enqueue('own', { i }))));
    const pid = await wakerPid(db);
    expect(pid).toBeDefined();
    const own = notices.of('own');
    // The first one started alone (the trigger); the seven started while it ran deferred theirs: the trigger
    // skipped them, and the sender's wake-ups (coalesced: at most seven) came after their commits.
    expect(own.filter((n) => n.pid !== pid)).toHaveLength(1);
    const sent = own.filter((n) => n.pid === pid).length;
    expect(sent).toBeGreaterThanOrEqual(1);
    expect(sent).toBeLessThanOrEqual(7);
    expect((await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'own'`)).rows[0].n).toBe(8);
  });

  it('deferred: delayed jobs, enqueueMany (one queue, several queues), enqueueUnique: one wake-up per queue; a duplicate wakes nobody', async () => {
    const pid = await wakerPid(db);
    await deferring(async () => {
      await queue.enqueue('later', {}, { delayMs: 60_000 });
      await queue.enqueueMany([{ queue: 'bulk-a', payload: 1 }, { queue: 'bulk-a', payload: 2 }]);
      await queue.enqueueMany([{ queue: 'bulk-b', payload: 1 }, { queue: 'bulk-c', payload: 2, priority: 3 }]);
      await queue.enqueueUnique('keyed', {}, { uniqueKey: 'k' });
    });
    for (const name of ['later', 'bulk-a', 'bulk-b', 'bulk-c', 'keyed']) expect(notices.of(name)).toEqual([{ queue: name, pid }]);

    let duplicate = { duplicate: false };
    await deferring(async () => (duplicate = await queue.enqueueUnique('keyed', {}, { uniqueKey: 'k' })));
    expect(duplicate.duplicate).toBe(true);
    await deferring(() => queue.enqueueManyUnique([{ queue: 'keyed', payload: {}, uniqueKey: 'k' }, { queue: 'keyed-2', payload: {}, uniqueKey: 'k2' }]));
    expect(notices.of('keyed')).toHaveLength(1); // the duplicates changed nothing
    expect(notices.of('keyed-2')).toEqual([{ queue: 'keyed-2', pid }]);
    // A replaced holder may run sooner than its workers' timers know: woken, by the sender alone.
    await deferring(() => queue.enqueueUnique('keyed', { v: 2 }, { uniqueKey: 'k', onConflict: 'replace' }));
    expect(notices.of('keyed')).toEqual([{ queue: 'keyed', pid }, { queue: 'keyed', pid }]);
  });

  it('raw SQL inserts, older versions of the library and enqueues in a caller’s transaction keep the trigger’s notice, sent at their commit', async () => {
    const raw = await db.connect();
    try {
      const { rows } = await raw.query<{ pid: number }>(`SELECT pg_backend_pid() AS pid`);
      await enqueued(() => raw.query(`INSERT INTO background_jobs (queue_name, payload) VALUES ('raw', '{}')`));
      expect(notices.of('raw')).toEqual([{ queue: 'raw', pid: rows[0].pid }]);
      // The plain insert statement is the one older versions sent: it never defers.
      expect(SQL.insertJob).not.toContain('pg_queue.wake');
      await enqueued(() => raw.query(SQL.insertJob, ['old-library', '{}', 0, 5, null, 0, null]));
      expect(notices.of('old-library')).toEqual([{ queue: 'old-library', pid: rows[0].pid }]);
    } finally {
      raw.release();
    }

    const before = notices.notices.length;
    const wakes = app.get(WakeSender);
    wakes.begin(); // even while other enqueues of this process are in flight
    await dataSource.transaction(async (manager) => {
      await queue.enqueue('in-tx', { n: 1 }, { manager });
      await queue.enqueueMany([{ queue: 'in-tx', payload: 2 }], { manager });
      await queue.enqueueUnique('in-tx', {}, { uniqueKey: 'u', manager });
      await notices.settle();
      expect(notices.of('in-tx')).toEqual([]); // nothing before the commit
    });
    wakes.end();
    await notices.settle();
    // One per statement, folded into one by PostgreSQL (same channel and payload in one transaction), from the
    // caller's connection; none from the sender.
    const inTx = notices.of('in-tx');
    expect(inTx).toHaveLength(1);
    expect(inTx[0].pid).not.toBe(await wakerPid(db));
    expect(notices.notices.length - before).toBe(1 + 2); // and the two markers
  });

  it('the setting does not leak: the next statement of the same transaction is notified by the trigger', async () => {
    const client = await db.connect();
    try {
      await client.query('BEGIN');
      await client.query(SQL.insertJobWakeDeferred, ['leak-a', '{}', 0, 5, null, 0, null]);
      expect((await client.query(`SELECT current_setting('pg_queue.wake', true) AS wake`)).rows[0].wake).toBe('');
      await client.query(`INSERT INTO background_jobs (queue_name, payload) VALUES ('leak-b', '{}')`);
      await client.query(SQL.insertJobsWakeDeferred, [['leak-a', 'leak-a'], '[1, 2]', [0, 0], [5, 5], [null, null], [0, 0], [null, null]]);
      await client.query(`INSERT INTO background_jobs (queue_name, payload) SELECT 'leak-c', '{}' FROM generate_series(1, 2)`);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    await notices.settle();
    expect(notices.of('leak-a')).toEqual([]); // deferred statements: their sender would wake them
    expect(notices.of('leak-b')).toHaveLength(1);
    expect(notices.of('leak-c')).toHaveLength(1);
    expect((await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name LIKE 'leak-%'`)).rows[0].n).toBe(6);
  });

  it('before the migration runs (the old trigger), an enqueue is notified twice: by the trigger and by the sender', async () => {
    const runner = { query: (sql: string) => db.query(sql) } as unknown as QueryRunner;
    await new DeferredWakeUps1764590000000().down(runner);
    try {
      await deferring(() => queue.enqueue('old-trigger', {}));
      const senders = notices.of('old-trigger').map((n) => n.pid);
      expect(senders).toHaveLength(2);
      expect(senders).toContain(await wakerPid(db));
    } finally {
      await new DeferredWakeUps1764590000000().up(runner);
    }
    await deferring(() => queue.enqueue('new-trigger', {}));
    expect(notices.of('new-trigger')).toHaveLength(1);
  });

  it('a wake sender whose backend is terminated: the enqueue succeeds, the loss is logged, the next wake-up reconnects', async () => {
    const first = await wakerPid(db);
    expect(first).toBeDefined();
    const { rows } = await db.query<{ ok: boolean }>(`SELECT pg_terminate_backend($1) AS ok`, [first]);
    expect(rows).toEqual([{ ok: true }]);
    let id = '';
    await deferring(async () => (id = await queue.enqueue('after-loss', {})));
    // On a new wake-up connection, or (when the send met the dead one first) on one of the pool's.
    await waitFor('the wake-up after the loss', async () => notices.of('after-loss').length === 1, 15_000);
    expect(notices.of('after-loss')[0].pid).not.toBe(first);
    expect((await queue.get(id))?.status).toBe('queued');
    await deferring(() => queue.enqueue('after-loss-2', {}));
    const second = await wakerPid(db);
    expect(second).toBeDefined();
    expect(second).not.toBe(first);
    expect(notices.of('after-loss-2')).toEqual([{ queue: 'after-loss-2', pid: second }]);
    // Either the idle connection's loss or the failed send (then retried): a warning that names the wake-up.
    const warnings = logger.lines.filter((l) => l.level === 'warn' && /wake-up/.test(l.message));
    expect(warnings.length).toBeGreaterThanOrEqual(1);
    expect(warnings[0].message).toMatch(/terminating connection due to administrator command/);
  });
});
