import { Module, type DynamicModule } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { TypeOrmModule } from '@nestjs/typeorm';
import { PgQueueModule } from 'nestjs-pg-queue';
import { dashboardBasicAuth, PgQueueDashboardModule } from 'nestjs-pg-queue/dashboard';
import { TerminusModule } from '@nestjs/terminus';
import { PgQueueHealthModule } from 'nestjs-pg-queue/health';
import { PgQueueMetricsModule } from 'nestjs-pg-queue/metrics';
import { DEMO_OPTIONS, type ResolvedDemoOptions } from './demo-options.js';
import { EmailHandler } from './handlers/email.handler.js';
import { FlakySyncHandler } from './handlers/flaky-sync.handler.js';
import { HealthController } from './health/health.controller.js';
import { ThumbnailHandler } from './handlers/thumbnail.handler.js';
import { JobsController } from './jobs/jobs.controller.js';
import { DEMO_MIGRATIONS } from './migrations/index.js';
import { Order } from './orders/order.entity.js';
import { OrdersController } from './orders/orders.controller.js';
import { OrdersService } from './orders/orders.service.js';
import { OrdersReportHandler } from './reports/orders-report.handler.js';
import { SchedulesController } from './reports/schedules.controller.js';
import { StatsController } from './stats/stats.controller.js';
import { DemoController } from './traffic/demo.controller.js';
import { DemoTrafficService } from './traffic/demo-traffic.service.js';
import { EventsController } from './events/events.controller.js';
import { JobEventCounter } from './events/job-event-counter.js';
import { OrdersSummaryHandler } from './reports/orders-summary.handler.js';
import { SummaryController } from './reports/summary.controller.js';

const MINUTE = 60_000;

/** How long Ctrl-C waits for running jobs before aborting them and putting them back in the queue. */
export const SHUTDOWN_GRACE_MS = 5_000;

@Module({})
export class AppModule {
  static forRoot(databaseUrl: string, options: ResolvedDemoOptions & { dashboardPassword?: string }): DynamicModule {
    const dashboardPassword = options.dashboardPassword ?? randomBytes(9).toString('base64url');
    return {
      module: AppModule,
      imports: [
        TypeOrmModule.forRoot({
          type: 'postgres',
          url: databaseUrl,
          entities: [Order],
          migrations: DEMO_MIGRATIONS,
          migrationsRun: true,
          synchronize: false,
          applicationName: 'pg-queue-demo',
          // Fail fast when the database is not there; the default retries for half a minute.
          retryAttempts: 2,
          retryDelay: 1_000,
        }),
        // Neither `dataSource` nor `connection`: the module reuses TypeOrmModule's DataSource, which is what
        // lets enqueue({ manager }) take part in the order's transaction. It runs its own migrations at boot.
        PgQueueModule.forRoot({
          // A worker that dies holds its jobs this long before the sweeper hands them to another.
          leaseMs: 15_000,
          shutdownGraceMs: SHUTDOWN_GRACE_MS,
          maintenance: {
            sweepIntervalMs: 5_000,
            pruneIntervalMs: MINUTE,
            // Short enough to see the pruner work in a long session, long enough to inspect a job.
            completedRetentionMs: 15 * MINUTE,
            // Dead letters wait for a human: keep them a week.
            failedRetentionMs: 7 * 24 * 60 * MINUTE,
          },
        }),
        // The dashboard at /dashboard, behind basic auth: admin acts, viewer only looks (password in the banner).
        PgQueueDashboardModule.forRoot({
          path: 'dashboard',
          auth: dashboardBasicAuth({
            users: [
              { name: 'admin', password: dashboardPassword },
              { name: 'viewer', password: dashboardPassword, access: 'read-only' },
            ],
          }),
        }),
        // GET /metrics (Prometheus text) and GET /health, /health/live, /health/ready (terminus).
        PgQueueMetricsModule.forRoot({}),
        TerminusModule,
        PgQueueHealthModule,
      ],
      controllers: [OrdersController, JobsController, StatsController, DemoController, SchedulesController, SummaryController, EventsController, HealthController],
      providers: [
        { provide: DEMO_OPTIONS, useValue: { startBurst: options.startBurst } },
        OrdersService,
        EmailHandler,
        FlakySyncHandler,
        ThumbnailHandler,
        OrdersReportHandler,
        DemoTrafficService,
        OrdersSummaryHandler,
        JobEventCounter,
      ],
    };
  }
}
