import type { PgQueueConnection } from '../connection/pg-queue-connection.js';
import type { JobHandlerRegistry } from '../discovery/job-handler.registry.js';
import type { JobEvents } from '../events/job-events.js';
import type { ServiceDatabase } from '../queue.service.js';
import type { ResolvedModuleOptions } from '../utils/resolve-options.js';

/** One PgQueueModule instance of the app: a database and the queues it owns. */
export interface QueueDatabase extends ServiceDatabase {
  readonly connection: PgQueueConnection;
  readonly events: JobEvents;
  readonly options: ResolvedModuleOptions;
  /** The handlers its workers run (metrics and health checks read them, and the workers). */
  readonly handlers: JobHandlerRegistry;
}
