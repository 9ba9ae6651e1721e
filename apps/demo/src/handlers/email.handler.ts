import { Injectable, Logger } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { JobHandler, type Job } from 'nestjs-pg-queue';
import { Emails, type EmailPayload } from '../queues/emails.queue.js';

/** A fake mail sender: logs the message after a short, SMTP-like pause. */
@Injectable()
export class EmailHandler {
  private readonly logger = new Logger('Emails');

  @JobHandler(Emails, { concurrency: 5, maxAttempts: 5, backoff: { baseMs: 1_000 }, timeoutMs: 10_000 })
  async send(job: Job<EmailPayload>): Promise<void> {
    // Passing job.signal lets a timeout, a cancel or a shutdown past the grace period stop the wait.
    await sleep(50 + Math.random() * 200, undefined, { signal: job.signal });
    const { to, subject } = job.payload;
    this.logger.log(`job ${job.id}: sent "${subject}" to ${to}`);
  }
}
