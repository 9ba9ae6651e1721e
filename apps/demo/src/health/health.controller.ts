import { Controller, Get } from '@nestjs/common';
import { HealthCheck, HealthCheckService } from '@nestjs/terminus';
import { PgQueueHealthIndicator } from 'nestjs-pg-queue/health';

/**
 * Probes as an orchestrator would use them (docs/metrics.md, Liveness and readiness): liveness restarts a
 * wedged process, readiness takes an instance out of the load balancer while it cannot reach the database;
 * GET /health shows everything, lag included, for a person or an alert.
 */
@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly queue: PgQueueHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  all() {
    return this.health.check([
      () => this.queue.isReady('pg-queue'),
      () => this.queue.isAlive('pg-queue-claim-loops'),
      () => this.queue.checkLag('pg-queue-lag', { maxLagMs: 5 * 60_000 }),
    ]);
  }

  @Get('live')
  @HealthCheck()
  live() {
    return this.health.check([() => this.queue.isAlive('pg-queue')]);
  }

  @Get('ready')
  @HealthCheck()
  ready() {
    return this.health.check([() => this.queue.isReady('pg-queue')]);
  }
}
