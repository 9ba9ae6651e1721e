import { ConfigurableModuleBuilder } from '@nestjs/common';
import { PgQueueError } from '../errors/pg-queue.error.js';
import { createMetricsController } from './metrics.controller.js';
import { BAD_METRICS_OPTION } from './metrics.messages.js';
import type { PgQueueMetricsModuleExtras, PgQueueMetricsOptions } from './pg-queue-metrics-options.interface.js';

export const {
  ConfigurableModuleClass: MetricsConfigurableModuleClass,
  MODULE_OPTIONS_TOKEN: METRICS_OPTIONS,
} = new ConfigurableModuleBuilder<PgQueueMetricsOptions>({ moduleName: 'PgQueueMetrics' })
  .setClassMethodName('forRoot')
  .setExtras<PgQueueMetricsModuleExtras>({ path: '/metrics' }, (definition, { path }) => {
    if (path !== false && (typeof path !== 'string' || path.trim() === '')) throw new PgQueueError(BAD_METRICS_OPTION('path', path, "a route such as '/metrics', or false"));
    return { ...definition, controllers: path === false ? [] : [createMetricsController(path)] };
  })
  .build();
