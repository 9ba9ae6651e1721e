import type { INestApplication, LogLevel } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { AppModule } from './app.module.js';
import type { DemoOptions } from './demo-options.js';

export interface CreateDemoAppOptions extends DemoOptions {
  /** Nest log levels; false silences Nest. Default: log, warn, error. */
  logger?: LogLevel[] | false;
}

/**
 * The demo's whole wiring, shared by main.ts and the e2e test. Returns the app not yet listening:
 * `await app.listen(port)` boots it (migrations, handler discovery, workers).
 */
export async function createDemoApp(databaseUrl: string, options: CreateDemoAppOptions = {}): Promise<INestApplication> {
  const { logger = ['log', 'warn', 'error'], startBurst = 0, dashboardPassword } = options;
  return NestFactory.create<NestExpressApplication>(AppModule.forRoot(databaseUrl, { startBurst, dashboardPassword }), {
    logger,
    // Throw instead of exiting the process, so the caller can stop the database it started.
    abortOnError: false,
    // An idle keep-alive connection (a browser on /stats) must not hold up app.close().
    forceCloseConnections: true,
  });
}
