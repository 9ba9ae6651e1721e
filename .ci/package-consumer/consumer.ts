// A consumer of the packed library, compiled by .ci/check-package.sh with skipLibCheck false: every type
// the published declarations import must come with the package or its declared peers.
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { JobHandler, PgQueueModule, QueueService, type Job } from 'nestjs-pg-queue';

@Injectable()
export class Mailer {
  constructor(private readonly queue: QueueService) {}
  @JobHandler('emails', { concurrency: 2 })
  async send(job: Job<{ to: string }>): Promise<void> {
    if (job.signal.aborted) return;
    await this.queue.enqueue('audit', { to: job.payload.to });
  }
}

@Module({ imports: [PgQueueModule.forRoot({ connection: 'postgres://localhost/db' })], providers: [Mailer] })
export class AppModule {}
