import { CreateBackgroundJobs1764460000000 } from './1764460000000-create-background-jobs.js';

/** The queue's schema migrations, in order: add them to your own DataSource's `migrations`, or let the module run them. */
export const PG_QUEUE_MIGRATIONS = [CreateBackgroundJobs1764460000000];

export { CreateBackgroundJobs1764460000000 };
