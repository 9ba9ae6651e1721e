import { SetMetadata } from '@nestjs/common';
import type { JobHandlerOptions } from '../interfaces/job-handler-options.interface.js';
import { JOB_HANDLER_METADATA } from '../pg-queue.constants.js';

export interface JobHandlerMetadata {
  queue: string;
  options: JobHandlerOptions;
}

/**
 * Marks a provider method as the handler of a queue. Resolving completes the job; throwing (or rejecting)
 * fails the attempt, which is retried with backoff until maxAttempts, then dead-lettered.
 */
export const JobHandler = (queue: string, options: JobHandlerOptions = {}): MethodDecorator =>
  SetMetadata<string, JobHandlerMetadata>(JOB_HANDLER_METADATA, { queue, options });
