import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper.js';
import type { JobHandlerMetadata } from '../decorators/job-handler.decorator.js';
import { PgQueueError } from '../errors/pg-queue.error.js';
import type { Job } from '../interfaces/job.interface.js';
import { PgQueueConnection } from '../connection/pg-queue-connection.js';
import { JOB_HANDLER_METADATA } from '../pg-queue.constants.js';
import { DUPLICATE_HANDLER, REQUEST_SCOPED_HANDLER } from '../pg-queue.messages.js';
import { RESOLVED_OPTIONS } from '../pg-queue.module-definition.js';
import { assertQueueName, resolveHandlerOptions, type ResolvedModuleOptions } from '../utils/resolve-options.js';
import { JobHandlerRegistry } from './job-handler.registry.js';

/**
 * Finds @JobHandler methods through Nest discovery and validates them (discovery only; the worker pool
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
      const meta = this.reflector.get<JobHandlerMetadata | undefined>(JOB_HANDLER_METADATA, prototype[methodName]);
      if (!meta) continue;
      const name = `${prototype.constructor?.name ?? 'anonymous'}.${methodName}`;
      if (!wrapper.isDependencyTreeStatic() || wrapper.isTransient) throw new PgQueueError(REQUEST_SCOPED_HANDLER(name));
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
}
