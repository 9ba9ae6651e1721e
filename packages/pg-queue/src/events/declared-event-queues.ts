import { Injectable, type BeforeApplicationShutdown, type OnApplicationBootstrap } from '@nestjs/common';
import { JobHandlerRegistry } from '../discovery/job-handler.registry.js';
import { JobStore } from '../store/job.store.js';
import { RetryBackoff } from '../utils/retry-backoff.js';
import { PgQueueLogger } from '../utils/pg-queue-logger.js';

/**
 * `@JobHandler(queue, { recordEvents: true })` (README: "Event stream"): at boot, this process turns recording on for
 * the queues it declares so, as `QueueService.recordEvents(queue)` does for every process. The database's function
 * changes nothing (and locks nothing) when the queue records already, so every process may send it at every boot. The
 * app boots whatever the database says: a failed call (the database down, or a long transaction holding
 * background_jobs past the function's 5 s lock_timeout) is logged and tried again in the background with backoff.
 */
@Injectable()
export class DeclaredEventQueues implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new PgQueueLogger('PgQueue');
  private readonly backoff = new RetryBackoff('turning on the event recording of declared queues', this.logger, 500, 30_000);
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly registry: JobHandlerRegistry,
    private readonly store: JobStore,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const queues = this.registry
      .all()
      .filter((h) => h.options.recordEvents)
      .map((h) => h.queue);
    if (queues.length > 0) await this.turnOn(queues);
  }

  beforeApplicationShutdown(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private async turnOn(queues: string[]): Promise<void> {
    const left = [...queues];
    try {
      while (left.length > 0) {
        await this.store.events.record(left[0], true);
        left.shift();
      }
      this.backoff.succeeded();
    } catch (error) {
      if (this.stopped) return;
      this.timer = setTimeout(() => void this.turnOn(left), this.backoff.failed(error));
    }
  }
}
