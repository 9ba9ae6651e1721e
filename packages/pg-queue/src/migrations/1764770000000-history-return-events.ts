import type { MigrationInterface, QueryRunner } from 'typeorm';
import { jobEventFunction } from './1764730000000-job-events.js';
import { EVENT_TX } from './1764740000000-event-order.js';
import { NESTED_ORDER } from './1764750000000-nested-event-order.js';

/**
 * A job that partitioned history gives back to background_jobs records no event: it was not enqueued.
 *
 * Why: a retry of a failed or cancelled job that history holds first moves it back to background_jobs as it is, with
 * the rest of its flow (history.sql.ts, BRING_BACK), and the event trigger took that insert for an enqueue. A bulk
 * retry brings back every matching job, also those it then refuses (a job whose parent failed: issue 39 item 12),
 * which the mover takes again on its next pass: each round wrote one more `enqueued` event after the job's `dead` or
 * `cancelled`, for a job that never ran again (the simulation's seed 1869304768 with partitioned history: 74 jobs).
 * The retry's own change of the row (failed to queued) still records `enqueued`, once.
 */
export class HistoryReturnEvents1764770000000 implements MigrationInterface {
  name = 'HistoryReturnEvents1764770000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(jobEventFunction(EVENT_TX, NESTED_ORDER, true));
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(jobEventFunction(EVENT_TX, NESTED_ORDER));
  }
}
