import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The demo's own table. The queue's table is not created here: PgQueueModule runs its own migrations at
 * start-up, under an advisory lock, and records them in this same `migrations` table.
 */
export class CreateOrders1764500000000 implements MigrationInterface {
  name = 'CreateOrders1764500000000';

  async up(q: QueryRunner): Promise<void> {
    // No CHECK (amount > 0) on purpose: the demo rejects bad orders in code, after the email job is already
    // enqueued, to show that the rollback takes the job with it.
    await q.query(`
      CREATE TABLE orders (
        id         bigserial PRIMARY KEY,
        email      text NOT NULL,
        item       text NOT NULL,
        amount     numeric(12, 2) NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE orders`);
  }
}
