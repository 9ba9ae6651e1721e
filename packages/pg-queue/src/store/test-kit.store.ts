import type { Pool } from 'pg';
import type { JobRecord } from '../interfaces/job.interface.js';
import { toJobRecord, type JobRow } from './job-read.store.js';
import { TEST_KIT_SQL } from './test-kit.sql.js';

/**
 * The testing kit's own table access (time and read-back), one method per statement, on the queue's pool.
 * Sent unnamed: tests run each a handful of times, and nothing is left prepared on the app's connections.
 */
export class TestKitStore {
  constructor(private readonly pool: Pool) {}

  /** Moves queued jobs not yet due `ms` closer to now; returns how many moved. `queues` null: all. */
  async advanceQueuedJobs(queues: string[] | null, ms: number): Promise<number> {
    return (await this.pool.query({ text: TEST_KIT_SQL.advanceQueuedJobs, values: [queues, ms] })).rowCount ?? 0;
  }

  /** Makes every queued job not yet due due now; returns how many. */
  async makeQueuedJobsDue(queues: string[] | null): Promise<number> {
    return (await this.pool.query({ text: TEST_KIT_SQL.makeQueuedJobsDue, values: [queues] })).rowCount ?? 0;
  }

  async listJobs(queues: string[] | null): Promise<JobRecord[]> {
    const { rows } = await this.pool.query<JobRow>({ text: TEST_KIT_SQL.listJobs, values: [queues] });
    return rows.map(toJobRecord);
  }

  async deleteAllJobs(): Promise<number> {
    const { rows } = await this.pool.query<{ deleted: number }>({ text: TEST_KIT_SQL.deleteAllJobs, values: [] });
    return rows[0].deleted;
  }

  /** Every recurring schedule's name (for fireSchedule's error). */
  async scheduleNames(): Promise<string[]> {
    const { rows } = await this.pool.query<{ name: string }>({ text: TEST_KIT_SQL.scheduleNames, values: [] });
    return rows.map((r) => r.name);
  }
}
