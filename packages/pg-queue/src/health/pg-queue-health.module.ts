import { Module } from '@nestjs/common';
import { PgQueueHealthIndicator } from './pg-queue-health.indicator.js';

/**
 * Provides PgQueueHealthIndicator: import it next to PgQueueModule (and TerminusModule), inject the indicator in
 * the app's health controller. No options: each check takes its own.
 */
@Module({
  providers: [PgQueueHealthIndicator],
  exports: [PgQueueHealthIndicator],
})
export class PgQueueHealthModule {}
