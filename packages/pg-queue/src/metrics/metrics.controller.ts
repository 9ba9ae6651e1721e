import { Controller, Get, Inject, Res, type Type } from '@nestjs/common';
import { PgQueueMetrics } from './pg-queue-metrics.service.js';

/** Both Express's response and Fastify's reply set a header this way. */
interface HeaderSetter {
  header(name: string, value: string): unknown;
}

/**
 * The controller that serves the Prometheus text at `path`, made per module definition since a route's path
 * is fixed when its class is decorated. A plain GET route: it works on the Express and the Fastify adapters.
 */
export function createMetricsController(path: string): Type<unknown> {
  @Controller()
  class PgQueueMetricsController {
    constructor(@Inject(PgQueueMetrics) private readonly metrics: PgQueueMetrics) {}

    @Get(path)
    async scrape(@Res({ passthrough: true }) response: HeaderSetter): Promise<string> {
      const { contentType, body } = await this.metrics.scrape();
      response.header('Content-Type', contentType);
      return body;
    }
  }
  return PgQueueMetricsController;
}
