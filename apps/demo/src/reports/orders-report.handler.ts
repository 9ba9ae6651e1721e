import { Injectable, Logger } from '@nestjs/common';
import { RecurringJob, type Job, type RecurringJobPayload } from 'nestjs-pg-queue';
import { DataSource } from 'typeorm';

/**
 * A "nightly" report, every minute so that the demo shows it: orders placed in the minute before each fire.
 * However many instances run, each minute is reported once; after a downtime, the latest missed minute is
 * reported once (missedFires: 'latest'). The fire time comes with the job, so a retry reports the same minute.
 */
@Injectable()
export class OrdersReportHandler {
  private readonly logger = new Logger('Reports');

  constructor(private readonly dataSource: DataSource) {}

  @RecurringJob('* * * * *', { name: 'orders-report', missedFires: 'latest', maxAttempts: 3, timeoutMs: 30_000 })
  async report(job: Job<RecurringJobPayload>): Promise<void> {
    const until = new Date(job.payload._schedule.fireAt);
    const from = new Date(until.getTime() - 60_000);
    const [row] = (await this.dataSource.query(
      `SELECT count(*)::int AS orders, coalesce(sum(amount), 0)::float8 AS total FROM orders WHERE created_at >= $1 AND created_at < $2`,
      [from, until],
    )) as { orders: number; total: number }[];
    this.logger.log(`orders ${from.toISOString().slice(11, 16)}-${until.toISOString().slice(11, 16)} UTC: ${row.orders}, total ${row.total.toFixed(2)}`);
  }
}
