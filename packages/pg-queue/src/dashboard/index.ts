// `nestjs-pg-queue/dashboard`: the embedded dashboard (docs/dashboard.md).
export { PgQueueDashboardModule } from './dashboard.module.js';
export { dashboardBasicAuth, type BasicAuthUser } from './dashboard-auth.js';
export type {
  DashboardAccess,
  DashboardAuthorize,
  DashboardAuthResult,
  DashboardGuardAuth,
  DashboardRequest,
  PgQueueDashboardAsyncOptions,
  PgQueueDashboardOptions,
} from './dashboard-options.interface.js';
