import { RecurringScheduler } from '../recurring/recurring-scheduler.js';

/**
 * Stands in for the RecurringScheduler in a test: the schedules declared in code are synced at boot (so
 * `schedules()` and the upsert/pause calls behave as in production), but nothing fires by itself: a tick on
 * the wall clock would add a job to whatever the test drains whenever a minute turns. A test fires a schedule
 * with the kit's fireSchedule(name).
 */
export class TestingRecurringScheduler extends RecurringScheduler {
  override async onApplicationBootstrap(): Promise<void> {
    if (this.options.recurring.enabled) await this.sync();
  }
}
