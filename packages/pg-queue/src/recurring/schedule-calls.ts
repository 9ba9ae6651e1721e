// QueueService's schedule methods that take more than one statement (README: "Recurring jobs"): kept here so that
// the service stays a list of calls. Times of fires come from the database clock.
import { PgQueueError } from '../errors/pg-queue.error.js';
import type { ScheduleInfo } from '../interfaces/recurring-job.interface.js';
import type { ScheduleDefinition, ScheduleStore } from '../store/schedule.store.js';
import { scheduleName } from '../utils/call-arguments.js';
import { firstFire, ruleOf } from './fire-times.js';
import type { RecurringScheduler } from './recurring-scheduler.js';

export class ScheduleCalls {
  constructor(
    private readonly store: ScheduleStore,
    private readonly scheduler: RecurringScheduler,
    private readonly orphanAfterMs: number,
  ) {}

  /**
   * Stores the schedule with its first fire after now (taken when its timing changed or it had ended; else the store
   * keeps the next fire, within the new end and limit).
   */
  async upsert(definition: ScheduleDefinition): Promise<ScheduleInfo> {
    const nowMs = await this.store.dbNowMs();
    const info = await this.store.upsertSchedule(definition, firstFire(ruleOf(definition), definition, nowMs));
    this.scheduler.wake();
    return info;
  }

  /** Resumes a paused schedule from its next fire after now; false if there is no such schedule. */
  async resume(name: string): Promise<boolean> {
    for (let attempt = 0; ; attempt++) {
      const row = await this.store.getSchedule(scheduleName(name), this.orphanAfterMs);
      if (!row) return false;
      if (!row.paused) return true;
      const nowMs = await this.store.dbNowMs();
      const bounds = { startMs: row.startDate?.getTime() ?? null, endMs: row.endDate?.getTime() ?? null };
      // An ended schedule stays ended; one whose first fire after now is past its end ends now.
      const next = row.firesLeft === 0 ? null : firstFire(row.every !== null ? { everyMs: row.every } : { cron: row.cron!, timeZone: row.timeZone }, bounds, nowMs);
      if (await this.store.resumeSchedule(name, next, row.revision, row.fires)) {
        this.scheduler.wake();
        return true;
      }
      // Changed between the read and the write (another instance): read it again.
      if (attempt === 5) throw new PgQueueError(`resumeSchedule(${JSON.stringify(name)}): the schedule kept changing; try again.`);
    }
  }

  async get(name: string): Promise<ScheduleInfo | null> {
    const row = await this.store.getSchedule(scheduleName(name), this.orphanAfterMs);
    if (!row) return null;
    const { revision: _revision, ...info } = row;
    return info;
  }
}

