import { Injectable } from '@nestjs/common';
import { describe, expect, it } from '@jest/globals';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { MaintenanceScheduler } from '../src/internal.js';
import { createTestDatabase } from '@internal/pg-harness';
import { SEED_SCHEMA } from './support/seed-schema.js';
import { sqlPool, startApp, waitFor } from './support/test-app.js';

const ran: unknown[] = [];

@Injectable()
class Mailer {
  @JobHandler('mail')
  async send(job: Job<{ to: string }>) {
    ran.push(job.payload.to);
  }
}

describe('adopting the seed application’s background_jobs table (issue 13 item 9)', () => {
  it('boots on it, keeps every row, and processes the jobs that were waiting', async () => {
    const url = await createTestDatabase('adoptseed');
    const db = sqlPool(url);
    for (const statement of SEED_SCHEMA) await db.query(statement);
    await db.query(`
      INSERT INTO background_jobs (queue_name, payload, status, attempts, locked_at, updated_at) VALUES
        ('mail', '{"to": "a"}', 'queued', 0, NULL, now()),
        ('mail', '{"to": "b"}', 'queued', 2, NULL, now()),
        ('mail', '{"to": "c"}', 'processing', 1, now() - interval '1 hour', now() - interval '1 hour'),
        ('mail', '{"to": "d"}', 'completed', 1, NULL, now() - interval '10 days'),
        ('mail', '{"to": "e"}', 'failed', 5, NULL, now() - interval '10 days')`);

    const app = await startApp(url, { providers: [Mailer], queue: { maintenance: { sweepIntervalMs: 100, completedRetentionMs: 86_400_000 } } });
    try {
      // The waiting jobs run; the one a seed worker held (no lease) is put back by the sweeper and runs too.
      // Outcomes are written after the handler returns: wait for the table, not for the handler calls.
      await waitFor('the seed jobs processed and recorded', async () => {
        const { rows } = await db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE status IN ('queued', 'processing')`);
        return rows[0].n === 0;
      });
      expect([...ran].sort()).toEqual(['a', 'b', 'c']);
      const { rows } = await db.query(`SELECT payload ->> 'to' AS to, status::text, finished_at IS NOT NULL AS finished FROM background_jobs ORDER BY id`);
      expect(rows).toEqual([
        { to: 'a', status: 'completed', finished: true },
        { to: 'b', status: 'completed', finished: true },
        { to: 'c', status: 'completed', finished: true },
        { to: 'd', status: 'completed', finished: true },
        { to: 'e', status: 'failed', finished: true },
      ]);
      // New jobs are claimed through our NOTIFY; cancel uses the added status; old finished rows follow retention.
      const queue = app.get(QueueService);
      await queue.enqueue('mail', { to: 'f' });
      await waitFor('a new job processed', async () => ran.includes('f'));
      const later = await queue.enqueue('mail', { to: 'g' }, { delayMs: 3_600_000 });
      expect(await queue.cancel(later)).toBe('cancelled');
      expect(await app.get(MaintenanceScheduler).pruner.runOnce()).toMatchObject({ ran: true, completed: 1 });

      const triggers = await db.query(`SELECT tgname FROM pg_trigger WHERE tgrelid = 'background_jobs'::regclass AND NOT tgisinternal ORDER BY 1`);
      expect(triggers.rows).toEqual([{ tgname: 'background_jobs_notify' }]);
      const indexes = await db.query(`SELECT indexname FROM pg_indexes WHERE tablename = 'background_jobs' ORDER BY 1`);
      expect(indexes.rows.map((r) => r.indexname)).toEqual([
        'background_jobs_claim_idx',
        'background_jobs_delayed_idx',
        'background_jobs_finished_idx',
        'background_jobs_flow_idx',
        'background_jobs_flow_status_idx',
        'background_jobs_in_flight_idx',
        'background_jobs_key_claim_idx',
        'background_jobs_key_priority_idx',
        'background_jobs_lifo_idx',
        'background_jobs_lifo_key_idx',
        'background_jobs_limited_idx',
        'background_jobs_pkey',
        'background_jobs_unique_key_idx',
      ]);
    } finally {
      await app.close();
      await db.end();
    }
  });
});
