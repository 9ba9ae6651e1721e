import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper.js';
import type { JobHandlerMetadata } from '../decorators/job-handler.decorator.js';
import { PgQueueError } from '../errors/pg-queue.error.js';
import type { Job } from '../interfaces/job.interface.js';
import { PgQueueConnection } from '../connection/pg-queue-connection.js';
import { JOB_HANDLER_METADATA, RECURRING_JOB_METADATA } from '../pg-queue.constants.js';
import {
  DUPLICATE_HANDLER,
  DUPLICATE_SCHEDULE,
  RECURRING_HANDLER_OPTIONS_TWICE,
  RECURRING_ON_REQUEST_SCOPED,
  RECURRING_QUEUE_MISMATCH,
  REQUEST_SCOPED_HANDLER,
} from '../pg-queue.messages.js';
import type { RecurringJobMetadata } from '../decorators/recurring-job.decorator.js';
import { RecurringJobRegistry } from '../recurring/recurring-job.registry.js';
import { resolveSchedule } from '../recurring/resolve-schedule.js';
import { RESOLVED_OPTIONS } from '../pg-queue.module-definition.js';
import { assertQueueName, resolveHandlerOptions, type ResolvedModuleOptions } from '../utils/resolve-options.js';
import { JobHandlerRegistry } from './job-handler.registry.js';

/**
 * Finds @JobHandler and @RecurringJob methods through Nest discovery and validates them (discovery only; the worker pool
 * runs them). Any problem stops the boot with an error that names the method.
 */
@Injectable()
export class JobHandlerExplorer implements OnModuleInit {
  private readonly logger = new Logger('PgQueue');

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
    private readonly registry: JobHandlerRegistry,
    private readonly schedules: RecurringJobRegistry,
    private readonly connection: PgQueueConnection,
    @Inject(RESOLVED_OPTIONS) private readonly options: ResolvedModuleOptions,
  ) {}

  async onModuleInit(): Promise<void> {
    try {
      for (const wrapper of this.discovery.getProviders()) this.explore(wrapper);
    } catch (error) {
      // The app never finishes booting, so no shutdown hook will close what the module opened.
      await this.connection.close();
      throw error;
    }
    const unknown = Object.keys(this.options.queues).filter((q) => !this.registry.get(q));
    if (unknown.length > 0 && this.options.workers) {
      this.logger.warn(`options.queues configures ${unknown.join(', ')}, but no @JobHandler handles them in this app`);
    }
  }

  private explore(wrapper: InstanceWrapper): void {
    // A singleton's instance tells its real class (also for useFactory / useValue providers); a request-scoped
    // provider has no instance yet, only its class.
    const prototype =
      wrapper.isDependencyTreeStatic() && wrapper.instance ? Object.getPrototypeOf(wrapper.instance) : wrapper.inject ? undefined : wrapper.metatype?.prototype;
    if (!prototype || typeof prototype !== 'object') return;
    for (const methodName of this.scanner.getAllMethodNames(prototype)) {
      const handlerMeta = this.reflector.get<JobHandlerMetadata | undefined>(JOB_HANDLER_METADATA, prototype[methodName]);
      const recurring = this.reflector.get<RecurringJobMetadata | undefined>(RECURRING_JOB_METADATA, prototype[methodName]);
      if (!handlerMeta && !recurring) continue;
      const name = `${prototype.constructor?.name ?? 'anonymous'}.${methodName}`;
      if (!wrapper.isDependencyTreeStatic() || wrapper.isTransient) {
        throw new PgQueueError(handlerMeta ? REQUEST_SCOPED_HANDLER(name) : RECURRING_ON_REQUEST_SCOPED(name));
      }
      // A @RecurringJob method is the handler of its schedule's queue (or of its @JobHandler queue).
      const meta = recurring ? this.declareSchedule(name, recurring, handlerMeta) : handlerMeta!;
      assertQueueName(meta.queue);
      const existing = this.registry.get(meta.queue);
      if (existing) throw new PgQueueError(DUPLICATE_HANDLER(meta.queue, existing.name, name));
      const instance = wrapper.instance as Record<string, (job: Job) => unknown>;
      this.registry.add({
        queue: meta.queue,
        name,
        options: resolveHandlerOptions(meta.queue, { ...meta.options, ...this.options.queues[meta.queue] }),
        handle: (job) => instance[methodName](job),
      });
    }
  }

  /** Validates a @RecurringJob, records its schedule, and returns the handler metadata the method stands for. */
  private declareSchedule(where: string, recurring: RecurringJobMetadata, handlerMeta: JobHandlerMetadata | undefined): JobHandlerMetadata {
    const options = recurring.options ?? {};
    const { name = where, queue, timeZone, payload, missedFires, priority, ...handlerOptions } = options;
    const label = `@RecurringJob on ${where}`;
    if (handlerMeta && queue !== undefined && queue !== handlerMeta.queue) throw new PgQueueError(RECURRING_QUEUE_MISMATCH(where, handlerMeta.queue, queue));
    if (handlerMeta && Object.keys(handlerOptions).length > 0) throw new PgQueueError(RECURRING_HANDLER_OPTIONS_TWICE(where, Object.keys(handlerOptions)));
    const meta = handlerMeta ?? { queue: queue ?? name, options: handlerOptions };
    let maxAttempts: number;
    try {
      maxAttempts = resolveHandlerOptions(meta.queue, { ...meta.options, ...this.options.queues[meta.queue] }).maxAttempts;
    } catch (error) {
      throw new PgQueueError(`${label}: ${(error as Error).message}`);
    }
    const definition = resolveSchedule(label, { name, queue: meta.queue, cron: recurring.cron, timeZone, payload, missedFires, priority, maxAttempts }, this.options.maxPayloadBytes);
    const existing = this.schedules.get(definition.name);
    if (existing) throw new PgQueueError(DUPLICATE_SCHEDULE(definition.name, existing.declaredBy, where));
    this.schedules.add({ definition, declaredBy: where });
    return meta;
  }
}
