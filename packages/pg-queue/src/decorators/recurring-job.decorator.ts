import { SetMetadata } from '@nestjs/common';
import type { RecurringJobOptions } from '../interfaces/recurring-job.interface.js';
import { RECURRING_JOB_METADATA } from '../pg-queue.constants.js';

export interface RecurringJobMetadata {
  /** The cron expression given as the first argument (undefined: the options alone, with `cron` or `every`). */
  cron: string | undefined;
  options: RecurringJobOptions;
}

/**
 * Runs a provider method on a schedule, once per fire across all instances: a cron expression
 * (`@RecurringJob('0 3 * * *', options)`) or a fixed interval from the last fire (`@RecurringJob({ every: 60_000 })`),
 * with an optional `limit` of fires and `startDate` / `endDate`. The method is the handler of the schedule's queue
 * (`options.queue`, default the schedule's name), with the handler options given here (retries, timeout, ...), or of
 * its @JobHandler queue when it also has one. Each fire is a job: `job.payload` is `options.payload` (its
 * `{{fireAt}}`, `{{fireDate}}` and `{{name}}` placeholders replaced) plus `_schedule: { name, fireAt }`. The options
 * are checked at boot: a bad one (cron and every both, every under 1 s, ...) stops it naming the method.
 */
export function RecurringJob(cron: string, options?: RecurringJobOptions): MethodDecorator;
export function RecurringJob(options: RecurringJobOptions & ({ cron: string } | { every: number })): MethodDecorator;
export function RecurringJob(cronOrOptions: string | RecurringJobOptions, options: RecurringJobOptions = {}): MethodDecorator {
  const metadata: RecurringJobMetadata =
    typeof cronOrOptions === 'string' || cronOrOptions === null || typeof cronOrOptions !== 'object'
      ? { cron: cronOrOptions as string, options }
      : { cron: undefined, options: cronOrOptions };
  return SetMetadata<string, RecurringJobMetadata>(RECURRING_JOB_METADATA, metadata);
}
