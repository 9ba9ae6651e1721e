import { Injectable, Logger } from '@nestjs/common';
import { OnJobEvent, type JobEvent } from 'nestjs-pg-queue';

export type EventCounts = Record<string, Record<string, number>>;

/**
 * Hooks on this instance's workers: counts outcomes per queue (GET /events) and logs each dead letter with
 * its last error. A listener runs inside the worker's process; if it threw, the queue would log it and go on.
 */
@Injectable()
export class JobEventCounter {
  private readonly logger = new Logger('Events');
  private readonly counts: EventCounts = {};

  @OnJobEvent('emails', ['completed', 'dead'])
  @OnJobEvent('sync', ['completed', 'retrying', 'dead'])
  @OnJobEvent('thumbnails', ['completed', 'retrying', 'dead'])
  @OnJobEvent('orders-summary', ['completed', 'dead'])
  count(event: JobEvent): void {
    const queue = (this.counts[event.job.queue] ??= {});
    queue[event.name] = (queue[event.name] ?? 0) + 1;
  }

  @OnJobEvent('sync', 'dead')
  @OnJobEvent('thumbnails', 'dead')
  logDeadLetter(event: JobEvent): void {
    this.logger.warn(`job ${event.job.id} (${event.job.queue}) dead after ${event.job.attempt} attempt(s): ${(event.error as Error | undefined)?.message}`);
  }

  @OnJobEvent('orders-summary', 'completed')
  logSummary(event: JobEvent): void {
    const result = event.result as { orders: number; total: number };
    this.logger.log(`summary job ${event.job.id}: ${result.orders} order(s), total ${result.total} (${Math.round(event.durationMs)} ms)`);
  }

  snapshot(): EventCounts {
    return structuredClone(this.counts);
  }
}
