import { CreateOrders1764500000000 } from './1764500000000-create-orders.js';

/** The demo's migrations, in order (the queue's own are run by PgQueueModule, not listed here). */
export const DEMO_MIGRATIONS = [CreateOrders1764500000000];
