// A consumer of the packed library, compiled by .ci/check-package.sh with skipLibCheck false: every type
// the published declarations import must come with the package or its declared peers.
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { JobHandler, PgQueueModule, QueueService, RecurringJob, type Job, type RecurringJobPayload } from 'nestjs-pg-queue';
import { dashboardBasicAuth, PgQueueDashboardModule } from 'nestjs-pg-queue/dashboard';

@Injectable()
export class Mailer {
  constructor(private readonly queue: QueueService) {}
  @JobHandler('emails', { concurrency: 2 })
  async send(job: Job<{ to: string }>): Promise<void> {
    if (job.signal.aborted) return;
    await this.queue.enqueue('audit', { to: job.payload.to });
  }

  @RecurringJob('0 8 * * 1-5', { name: 'digest', timeZone: 'Europe/Berlin', missedFires: { windowMs: 3_600_000 } })
  async digest(job: Job<RecurringJobPayload<{ kind?: string }>>): Promise<void> {
    const schedules = await this.queue.schedules();
    if (schedules.length === 0) console.log(job.payload._schedule.fireAt);
  }
}

@Module({
  imports: [
    PgQueueModule.forRoot({ connection: 'postgres://localhost/db' }),
    PgQueueDashboardModule.forRoot({ path: 'queues', auth: dashboardBasicAuth({ users: [{ name: 'ops', password: 'a-long-password' }] }) }),
  ],
  providers: [Mailer],
})
export class AppModule {}
