import { SetMetadata } from '@nestjs/common';
import type { BatchOptions, JobHandlerOptions } from '../interfaces/job-handler-options.interface.js';
import type { BatchJob, Job } from '../interfaces/job.interface.js';
import { JOB_HANDLER_METADATA } from '../pg-queue.constants.js';
import { queueNameOf, type QueueDefinition } from '../typed/queue-definition.js';

export interface JobHandlerMetadata {
  queue: string;
  options: JobHandlerOptions;
}

/**
 * `@JobHandler(definition)`: a method decorator whose signature checks the method against the queue's types.
 * The method must be callable as `(job: Job<TPayload>) => TResult | Promise<TResult>`: its parameter may be a
 * narrower view of the job (`Job<{ to: string }>`, `Job`), but a field TPayload does not have, an unrelated
 * payload type, a second required parameter or a return type that is not TResult is a compile error (TS1241
 * on the decorator). It is not a plain MethodDecorator: to compose it with `applyDecorators`, pass the queue's name
 * (`JobHandler(Emails.name)`), which gives up the check.
 */
export type TypedJobHandlerDecorator<TPayload, TResult> = <M extends (job: Job<TPayload>) => TResult | Promise<TResult>>(
  target: object,
  propertyKey: string | symbol,
  descriptor: TypedPropertyDescriptor<M>,
) => void;

/**
 * `@JobHandler(definition, { batch })`: the method must be callable as `(jobs: BatchJob<TPayload>[]) => unknown` (a
 * batch handler's call; what it returns is not stored: `job.complete(result)` sets a job's result).
 */
export type TypedBatchHandlerDecorator<TPayload> = <M extends (jobs: BatchJob<TPayload>[]) => unknown>(
  target: object,
  propertyKey: string | symbol,
  descriptor: TypedPropertyDescriptor<M>,
) => void;

/**
 * Marks a provider method as the handler of a queue, named by a string or by a `defineQueue` definition (which
 * also checks the method's types). Resolving completes the job (its value is the job's result); throwing (or
 * rejecting) fails the attempt, which is retried with backoff until maxAttempts, then dead-lettered.
 */
export function JobHandler<TPayload, TResult>(queue: QueueDefinition<TPayload, TResult>, options: JobHandlerOptions & { batch: BatchOptions }): TypedBatchHandlerDecorator<TPayload>;
export function JobHandler<TPayload, TResult>(queue: QueueDefinition<TPayload, TResult>, options?: JobHandlerOptions): TypedJobHandlerDecorator<TPayload, TResult>;
export function JobHandler(queue: string, options?: JobHandlerOptions): MethodDecorator;
export function JobHandler(queue: string | QueueDefinition<unknown, unknown>, options: JobHandlerOptions = {}): MethodDecorator {
  return SetMetadata<string, JobHandlerMetadata>(JOB_HANDLER_METADATA, { queue: queueNameOf(queue), options });
}
