// nestjs-pg-queue/health: health checks of the queue, for @nestjs/terminus or an app's own endpoint (docs/metrics.md).
export { PgQueueHealthModule } from './pg-queue-health.module.js';
export { PgQueueHealthIndicator } from './pg-queue-health.indicator.js';
export type { HealthResult, DatabaseCheckOptions, ReadinessCheckOptions, ClaimLoopsCheckOptions, LagCheckOptions } from './health-check-options.interface.js';
