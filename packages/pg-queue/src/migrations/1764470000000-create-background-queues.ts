import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Per-queue state shared by every instance: today, whether the queue is paused. */
export class CreateBackgroundQueues1764470000000 implements MigrationInterface {
  name = 'CreateBackgroundQueues1764470000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE background_queues (
        queue_name text PRIMARY KEY,
        paused     boolean NOT NULL DEFAULT false,
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE background_queues`);
  }
}
