import { SetMetadata } from '@nestjs/common';
import type { RecurringJobOptions } from '../interfaces/recurring-job.interface.js';
import { RECURRING_JOB_METADATA } from '../pg-queue.constants.js';

export interface RecurringJobMetadata {
  cron: string;
  options: RecurringJobOptions;
}

/**
 * Runs a provider method on a cron schedule, once per fire time across all instances. The method is the
 * handler of the schedule's queue (`options.queue`, default the schedule's name), with the handler options
 * given here (retries, timeout, ...), or of its @JobHandler queue when it also has one. Each fire is a job:
 * `job.payload` is `options.payload` plus `_schedule: { name, fireAt }`.
 */
export const RecurringJob = (cron: string, options: RecurringJobOptions = {}): MethodDecorator =>
  SetMetadata<string, RecurringJobMetadata>(RECURRING_JOB_METADATA, { cron, options });
