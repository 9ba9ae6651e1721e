import { Inject, Injectable, type OnApplicationShutdown, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { ContextIdFactory, DiscoveryService, MetadataScanner, ModuleRef, Reflector } from '@nestjs/core';
import { Injector } from '@nestjs/core/injector/injector.js';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper.js';
import type { JobHandlerMetadata } from '../decorators/job-handler.decorator.js';
import type { OnJobEventMetadata } from '../decorators/on-job-event.decorator.js';
import { JOB_EVENT_NAMES, JobEvents, type JobEvent, type JobEventName } from '../events/job-events.js';
import { PgQueueError } from '../errors/pg-queue.error.js';
import type { Job } from '../interfaces/job.interface.js';
import { PgQueueConnection } from '../connection/pg-queue-connection.js';
import { DATABASE_NAME, JOB_HANDLER_METADATA, ON_JOB_EVENT_METADATA, RECURRING_JOB_METADATA } from '../pg-queue.constants.js';
import { QueueDatabases } from '../databases/queue-databases.js';
import {
  DUPLICATE_HANDLER,
  DUPLICATE_SCHEDULE,
  ON_JOB_EVENT_NO_HANDLER,
  ON_JOB_EVENT_REQUEST_SCOPED,
  RECURRING_HANDLER_OPTIONS_TWICE,
  RECURRING_QUEUE_MISMATCH,
  TRANSACTIONAL_WITHOUT_DATA_SOURCE,
  UNKNOWN_JOB_EVENT,
} from '../pg-queue.messages.js';
import type { RecurringJobMetadata } from '../decorators/recurring-job.decorator.js';
import { RecurringJobRegistry } from '../recurring/recurring-job.registry.js';
import { resolveSchedule } from '../recurring/resolve-schedule.js';
import { batchCheckedAtStart, checkedAtStart } from '../typed/payload-check-at-start.js';
import { RESOLVED_OPTIONS } from '../pg-queue.constants.js';
import { assertQueueName, resolveHandlerOptions, type ResolvedModuleOptions } from '../utils/resolve-options.js';
import { JobHandlerRegistry } from './job-handler.registry.js';
import { PgQueueLogger } from '../utils/pg-queue-logger.js';
import { ThreadPool } from '../worker/threads/thread-pool.js';
import { threadHandle } from '../worker/threads/thread-attempt.js';

/** The queue a @RecurringJob without @JobHandler fires into (declareSchedule's default: the schedule's name). */
function scheduleQueue(where: string, recurring: RecurringJobMetadata): string {
  return recurring.options?.queue ?? recurring.options?.name ?? where;
}

/** An @OnJobEvent method found at boot, subscribed once every provider is explored. */
interface FoundListener {
  where: string;
  queue: string;
  names: readonly JobEventName[];
  listener: (event: JobEvent) => unknown;
}

/**
 * Finds @JobHandler, @RecurringJob and @OnJobEvent methods through Nest discovery and validates them (discovery
 * only; the worker pool runs the handlers, the JobEvents bus calls the listeners). Any problem stops the boot
 * with an error that names the method.
 *
 * A handler on a singleton is called directly. A handler on a request-scoped or transient provider (or one
 * that injects a request-scoped service) gets a DI context of its own per attempt, with the Job as its
 * REQUEST: its provider and the request-scoped services it injects are made afresh for each attempt (durable
 * providers are shared per the app's ContextIdStrategy, which receives the Job).
 */
@Injectable()
export class JobHandlerExplorer implements OnModuleInit, OnModuleDestroy, OnApplicationShutdown {
  private readonly logger = new PgQueueLogger('PgQueue');
  private readonly injector = new Injector();
  private readonly listeners: FoundListener[] = [];
  private unsubscribe: (() => void)[] = [];
  /** The thread handlers' pools, closed after the worker pool's shutdown (its grace) is over. */
  private readonly threadPools: ThreadPool[] = [];

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
    private readonly registry: JobHandlerRegistry,
    private readonly schedules: RecurringJobRegistry,
    private readonly connection: PgQueueConnection,
    private readonly events: JobEvents,
    private readonly moduleRef: ModuleRef,
    @Inject(RESOLVED_OPTIONS) private readonly options: ResolvedModuleOptions,
    private readonly databases: QueueDatabases,
    @Inject(DATABASE_NAME) private readonly databaseName: string,
  ) {}

  /**
   * Whether this instance's database owns `queue`: each PgQueueModule instance explores every provider of the app and
   * keeps the handlers, schedules and listeners of its own queues (a queue no database owns is refused here, by name).
   */
  private owns(queue: string): boolean {
    return this.databases.ownerOf(queue).name === this.databaseName;
  }

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
    for (const { where, queue, names, listener } of this.listeners) {
      if (!this.owns(queue)) continue;
      if (!this.options.workers || !this.registry.get(queue)) this.logger.warn(ON_JOB_EVENT_NO_HANDLER(where, queue, this.options.workers));
      this.unsubscribe.push(this.events.listen(listener, { queue, names }));
    }
  }

  onModuleDestroy(): void {
    for (const stop of this.unsubscribe) stop();
    this.unsubscribe = [];
  }

  /**
   * Every beforeApplicationShutdown hook (the worker pool's drain within shutdownGraceMs, then its abort and put-back
   * of what still ran) has returned by now: the threads still running are terminated.
   */
  async onApplicationShutdown(): Promise<void> {
    await Promise.all(this.threadPools.splice(0).map((pool) => pool.close()));
  }

  private explore(wrapper: InstanceWrapper): void {
    // A singleton's instance tells its real class (also for useFactory / useValue providers); a request-scoped
    // provider has no instance yet, only its class.
    const prototype =
      wrapper.isDependencyTreeStatic() && wrapper.instance ? Object.getPrototypeOf(wrapper.instance) : wrapper.inject ? undefined : wrapper.metatype?.prototype;
    if (!prototype || typeof prototype !== 'object') return;
    const perAttempt = !wrapper.isDependencyTreeStatic() || wrapper.isTransient;
    for (const methodName of this.scanner.getAllMethodNames(prototype)) {
      const handlerMeta = this.reflector.get<JobHandlerMetadata | undefined>(JOB_HANDLER_METADATA, prototype[methodName]);
      const recurring = this.reflector.get<RecurringJobMetadata | undefined>(RECURRING_JOB_METADATA, prototype[methodName]);
      const onEvents = this.reflector.get<OnJobEventMetadata[] | undefined>(ON_JOB_EVENT_METADATA, prototype[methodName]);
      const name = `${prototype.constructor?.name ?? 'anonymous'}.${methodName}`;
      if (onEvents) this.foundListeners(wrapper, name, methodName, onEvents, perAttempt);
      if (!handlerMeta && !recurring) continue;
      if (!this.owns(handlerMeta?.queue ?? scheduleQueue(name, recurring!))) continue;
      // A @RecurringJob method is the handler of its schedule's queue (or of its @JobHandler queue).
      const meta = recurring ? this.declareSchedule(name, recurring, handlerMeta) : handlerMeta!;
      assertQueueName(meta.queue);
      const existing = this.registry.get(meta.queue);
      if (existing) throw new PgQueueError(DUPLICATE_HANDLER(meta.queue, existing.name, name));
      const instance = wrapper.instance as Record<string, (job: Job) => unknown>;
      const options = resolveHandlerOptions(meta.queue, { ...meta.options, ...this.options.queues[meta.queue] });
      // Refused here, at discovery, before anything of the module has started.
      if (options.transactional && this.options.workers && !this.connection.appDataSource) throw new PgQueueError(TRANSACTIONAL_WITHOUT_DATA_SOURCE(meta.queue, name, this.databaseName));
      if (options.batch) {
        // A batch handler: the method takes the jobs of one call; a single job (the testing kit's drain) is a call of one.
        const call = perAttempt ? this.perAttemptHandle(wrapper, methodName) : (jobs: Job[]) => instance[methodName](jobs as never);
        const handleBatch = batchCheckedAtStart(meta.queue, call as (jobs: Job[]) => unknown);
        this.registry.add({ queue: meta.queue, name, options, handle: (job) => handleBatch([job]), handleBatch, perAttempt });
        continue;
      }
      if (options.thread) {
        // A thread handler: the method is not called; its queue's jobs run in the thread file (worker/threads/). Its
        // pool is made only where workers run, so an enqueue-only app neither needs the compiled entry nor starts threads.
        const pool = this.options.workers ? new ThreadPool(meta.queue, options.thread, this.logger) : undefined;
        if (pool) this.threadPools.push(pool);
        this.registry.add({ queue: meta.queue, name, options, handle: checkedAtStart(meta.queue, threadHandle(meta.queue, pool)), perAttempt: false });
        continue;
      }
      this.registry.add({
        queue: meta.queue,
        name,
        options,
        // Singletons keep the direct call: no context, no resolve, nothing per job.
        // A queue defined with a validator has it run before each attempt (typed/payload-check-at-start.ts).
        handle: checkedAtStart(meta.queue, perAttempt ? this.perAttemptHandle(wrapper, methodName) : (job) => instance[methodName](job)),
        perAttempt,
      });
    }
  }

  /**
   * The handle of a method on a provider that is not a singleton: a DI context per attempt (ContextIdFactory
   * applies the app's ContextIdStrategy, so durable trees are reused), the Job registered as its REQUEST, the
   * provider resolved in it (as Nest's router does for a request-scoped controller), then the call.
   */
  private perAttemptHandle(wrapper: InstanceWrapper, methodName: string): (job: Job) => Promise<unknown> {
    const host = wrapper.host!;
    const ctorHost = (wrapper.instance as object | undefined) ?? { constructor: wrapper.metatype };
    return async (job) => {
      const contextId = ContextIdFactory.getByRequest(job);
      this.moduleRef.registerRequestByContextId(job, contextId);
      const instance = (await this.injector.loadPerContext(ctorHost, host, host.providers, contextId, wrapper)) as Record<string, (job: Job) => unknown>;
      return instance[methodName](job);
    };
  }

  /** Validates the @OnJobEvent declarations of one method; they are subscribed once discovery is done. */
  private foundListeners(wrapper: InstanceWrapper, where: string, methodName: string, declared: OnJobEventMetadata[], perAttempt: boolean): void {
    if (perAttempt) throw new PgQueueError(ON_JOB_EVENT_REQUEST_SCOPED(where));
    const instance = wrapper.instance as Record<string, (event: JobEvent) => unknown>;
    for (const { queue, events } of declared) {
      try {
        assertQueueName(queue);
      } catch (error) {
        throw new PgQueueError(`@OnJobEvent on ${where}: ${(error as Error).message}`);
      }
      if (events.length === 0) throw new PgQueueError(UNKNOWN_JOB_EVENT(where, [], JOB_EVENT_NAMES));
      for (const name of events) if (!JOB_EVENT_NAMES.includes(name)) throw new PgQueueError(UNKNOWN_JOB_EVENT(where, name, JOB_EVENT_NAMES));
      this.listeners.push({ where, queue, names: events, listener: (event) => instance[methodName](event) });
    }
  }

  /** Validates a @RecurringJob, records its schedule, and returns the handler metadata the method stands for. */
  private declareSchedule(where: string, recurring: RecurringJobMetadata, handlerMeta: JobHandlerMetadata | undefined): JobHandlerMetadata {
    const options = recurring.options ?? {};
    const { name = where, queue, timeZone, payload, missedFires, priority, cron: optionsCron, every, limit, startDate, endDate, ...handlerOptions } = options;
    const label = `@RecurringJob on ${where}`;
    if (recurring.cron !== undefined && optionsCron !== undefined) throw new PgQueueError(`${label}: cron given twice (the first argument and options.cron): give it once`);
    if (handlerMeta && queue !== undefined && queue !== handlerMeta.queue) throw new PgQueueError(RECURRING_QUEUE_MISMATCH(where, handlerMeta.queue, queue));
    if (handlerMeta && Object.keys(handlerOptions).length > 0) throw new PgQueueError(RECURRING_HANDLER_OPTIONS_TWICE(where, Object.keys(handlerOptions)));
    const meta = handlerMeta ?? { queue: scheduleQueue(where, recurring), options: handlerOptions };
    let maxAttempts: number;
    try {
      maxAttempts = resolveHandlerOptions(meta.queue, { ...meta.options, ...this.options.queues[meta.queue] }).maxAttempts;
    } catch (error) {
      throw new PgQueueError(`${label}: ${(error as Error).message}`);
    }
    const definition = resolveSchedule(
      label,
      { name, queue: meta.queue, cron: recurring.cron ?? optionsCron, every, timeZone, payload, missedFires, priority, maxAttempts, limit, startDate, endDate },
      this.options.maxPayloadBytes,
    );
    const existing = this.schedules.get(definition.name);
    if (existing) throw new PgQueueError(DUPLICATE_SCHEDULE(definition.name, existing.declaredBy, where));
    this.schedules.add({ definition, declaredBy: where });
    return meta;
  }
}
