// Internals for the library's own tests, benchmarks and tools (operators' passes driven by hand, the stores): not an
// entry point of package.json `exports`, so an app cannot import it; names and shapes here change without notice. The
// public API is src/index.ts (and the entry points beside it), what README.md and docs/ document.
export { WorkerPool } from './worker/worker-pool.js';
export { MaintenanceScheduler } from './maintenance/maintenance.scheduler.js';
export { JobStore } from './store/job.store.js';
export { RecurringScheduler } from './recurring/recurring-scheduler.js';
export { MODULE_OPTIONS_TOKEN as PG_QUEUE_OPTIONS } from './pg-queue.module-definition.js';
export type { QueueDatabases } from './databases/queue-databases.js';
export type { QueueDatabase } from './databases/queue-database.js';
export type { DatabaseIdentityRow } from './store/job-store.types.js';
