import { Injectable, Module, type INestApplicationContext } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { Column, DataSource, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { JobHandler, PgQueueModule, QueueService, type Job } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

@Entity({ name: 'orders' })
class Order {
  @PrimaryGeneratedColumn()
  id!: number;

  @Column({ type: 'text' })
  email!: string;
}

const sent: string[] = [];

@Injectable()
class Mailer {
  @JobHandler('emails')
  async send(job: Job<{ to: string }>) {
    sent.push(job.payload.to);
  }
}

describe('transactional enqueue (reusing the app TypeORM DataSource)', () => {
  let url: string;
  let app: INestApplicationContext;
  let db: pg.Pool;

  beforeAll(async () => {
    url = await createTestDatabase('txn');
    db = sqlPool(url);
    app = await startApp(url, {
      providers: [Mailer],
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url, entities: [Order], synchronize: true }),
        PgQueueModule.forRoot({}), // no dataSource, no connection: reuses TypeOrmModule's
      ],
    });
  });
  afterAll(async () => {
    await app?.close();
    await db?.end();
  });

  it('commits the job with the caller’s writes', async () => {
    const dataSource = app.get(DataSource);
    const queue = app.get(QueueService);
    const jobId = await dataSource.transaction(async (manager) => {
      await manager.save(manager.create(Order, { email: 'a@example.com' }));
      const id = await queue.enqueue('emails', { to: 'a@example.com' }, { manager });
      // Not visible outside the transaction yet: nobody can run the email before the order exists.
      const outside = await db.query('SELECT count(*)::int AS n FROM background_jobs WHERE id = $1', [id]);
      expect(outside.rows[0].n).toBe(0);
      return id;
    });
    await waitFor('email job completed', async () => (await queue.get(jobId))?.status === 'completed');
    expect(sent).toContain('a@example.com');
    const orders = await db.query(`SELECT count(*)::int AS n FROM orders WHERE email = 'a@example.com'`);
    expect(orders.rows[0].n).toBe(1);
  });

  it('rolls the job back with the caller’s writes', async () => {
    const dataSource = app.get(DataSource);
    const queue = app.get(QueueService);
    let enqueued: string | undefined;
    await expect(
      dataSource.transaction(async (manager) => {
        await manager.save(manager.create(Order, { email: 'b@example.com' }));
        enqueued = await queue.enqueue('emails', { to: 'b@example.com' }, { manager });
        throw new Error('payment declined');
      }),
    ).rejects.toThrow('payment declined');
    expect(enqueued).toMatch(/^\d+$/);
    const jobs = await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE payload->>'to' = 'b@example.com'`);
    const orders = await db.query(`SELECT count(*)::int AS n FROM orders WHERE email = 'b@example.com'`);
    expect(jobs.rows[0].n).toBe(0);
    expect(orders.rows[0].n).toBe(0);
    expect(await queue.get(enqueued!)).toBeNull();
  });

  it('enqueueMany inside a transaction is all or nothing too', async () => {
    const dataSource = app.get(DataSource);
    const queue = app.get(QueueService);
    await expect(
      dataSource.transaction(async (manager) => {
        await queue.enqueueMany(
          [1, 2, 3].map((i) => ({ queue: 'emails', payload: { to: `many${i}@example.com` } })),
          { manager },
        );
        throw new Error('abort');
      }),
    ).rejects.toThrow('abort');
    const jobs = await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE payload->>'to' LIKE 'many%'`);
    expect(jobs.rows[0].n).toBe(0);
  });
});

@Module({})
class Empty {}

describe('reusing a named TypeORM connection and a given DataSource', () => {
  it('finds the DataSource by dataSourceName', async () => {
    const url = await createTestDatabase('named');
    const app = await startApp(url, {
      imports: [
        Empty,
        TypeOrmModule.forRoot({ name: 'jobsdb', type: 'postgres', url }),
        PgQueueModule.forRootAsync({ dataSourceName: 'jobsdb', useFactory: () => ({ workers: false }) }),
      ],
    });
    const queue = app.get(QueueService);
    const id = await queue.enqueue('anything', { ok: true });
    expect((await queue.get(id))?.status).toBe('queued');
    await app.close();
  });

  it('uses a DataSource passed in the options and leaves it open at shutdown', async () => {
    const url = await createTestDatabase('given');
    const dataSource = new DataSource({ type: 'postgres', url });
    const app = await startApp(url, { imports: [PgQueueModule.forRoot({ dataSource, workers: false })] });
    const id = await app.get(QueueService).enqueue('anything', 1);
    await app.close();
    expect(dataSource.isInitialized).toBe(true); // the app's to close, not ours
    const rows = await dataSource.query('SELECT payload FROM background_jobs WHERE id = $1', [id]);
    expect(rows[0].payload).toBe(1);
    await dataSource.destroy();
  });
});
