import { Injectable } from '@nestjs/common';
import type { Job } from '../interfaces/job.interface.js';
import type { ResolvedHandlerOptions } from '../interfaces/job-handler-options.interface.js';

export interface RegisteredHandler {
  queue: string;
  /** `Class.method`, for logs and errors. */
  name: string;
  options: ResolvedHandlerOptions;
  handle: (job: Job) => unknown;
  /** A batch handler's method (options.batch), called with the jobs of one call; `handle` then calls it with one job. */
  handleBatch?: (jobs: Job[]) => unknown;
  /** The method's provider is request-scoped or transient: each attempt resolves it in a DI context of its own. */
  perAttempt?: boolean;
}

/** The runtime map of queue name to handler, filled by the explorer, read by the worker pool and QueueService. */
@Injectable()
export class JobHandlerRegistry {
  private readonly handlers = new Map<string, RegisteredHandler>();

  add(handler: RegisteredHandler): void {
    this.handlers.set(handler.queue, handler);
  }

  get(queue: string): RegisteredHandler | undefined {
    return this.handlers.get(queue);
  }

  all(): RegisteredHandler[] {
    return [...this.handlers.values()];
  }
}
