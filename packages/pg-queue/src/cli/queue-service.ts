import type { QueueService } from '../queue.service.js';
import type { RecurringScheduler } from '../recurring/recurring-scheduler.js';
import type { PgQueueModuleOptions } from '../interfaces/pg-queue-options.interface.js';
import type { Connection } from './connection.js';

/**
 * The library's own QueueService on the command's connection (no Nest, no workers), so that what the command does
 * goes through exactly the checks and statements an app's call does. Its RecurringScheduler is never started (no
 * Nest lifecycle): fireNow and the schedule methods use it, and its wake() then does nothing. Loaded on demand:
 * commands that do not need it do not load the service's import graph.
 */
export async function queueServiceOf(connection: Connection, options: PgQueueModuleOptions = {}): Promise<{ service: QueueService; scheduler: RecurringScheduler }> {
  const { QueueService } = await import('../queue.service.js');
  const { JobHandlerRegistry } = await import('../discovery/job-handler.registry.js');
  const { resolveModuleOptions } = await import('../utils/resolve-options.js');
  const { ScheduleStore } = await import('../store/schedule.store.js');
  const { RecurringScheduler } = await import('../recurring/recurring-scheduler.js');
  const { RecurringJobRegistry } = await import('../recurring/recurring-job.registry.js');
  const resolved = resolveModuleOptions({ ...options, migrationsRun: false });
  const jobs = connection.jobStore();
  const registry = new JobHandlerRegistry();
  const schedules = new ScheduleStore(connection.getPool(), { transactionPooler: connection.transactionPooler });
  const scheduler = new RecurringScheduler(schedules, jobs, new RecurringJobRegistry(), registry, resolved);
  return { service: new QueueService(jobs, registry, resolved, schedules, scheduler), scheduler };
}
