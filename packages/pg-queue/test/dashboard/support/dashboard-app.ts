import { Injectable, Module, type DynamicModule, type INestApplication, type LoggerService, type Provider } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { JobHandler, PgQueueModule, type Job, type PgQueueModuleOptions } from 'nestjs-pg-queue';
import { PgQueueDashboardModule, type PgQueueDashboardOptions } from 'nestjs-pg-queue/dashboard';

/** Whether the 'flaky' queue's handler throws: the retry case turns it off before retrying from the page. */
export const flaky = { fail: true };

@Injectable()
export class FlakyHandler {
  @JobHandler('flaky', { maxAttempts: 1 })
  async run(job: Job<{ n: number }>) {
    if (flaky.fail) throw new Error(`upstream refused job ${job.id} (n=${job.payload.n})`);
    return { ok: true };
  }
}

/**
 * The 'stepper' queue's handler reports progress 1 of 4, waits until the test releases it, reports 3 of 4, waits
 * again, and completes: the job page's live reload is watched between the steps.
 */
export const stepper = { waiting: [] as (() => void)[] };

@Injectable()
export class StepperHandler {
  @JobHandler('stepper', { maxAttempts: 1 })
  async run(job: Job<Record<string, never>>) {
    job.progress({ current: 1, total: 4 });
    await new Promise<void>((resolve) => stepper.waiting.push(resolve));
    job.progress({ current: 3, total: 4 });
    await new Promise<void>((resolve) => stepper.waiting.push(resolve));
    return { steps: 4 };
  }
}

export interface DashboardAppOptions {
  adapter: 'express' | 'fastify';
  dashboard: PgQueueDashboardOptions;
  queue?: PgQueueModuleOptions;
  handlers?: boolean;
  /** More providers (a spec's own handlers). */
  providers?: Provider[];
  /** Collects the dashboard's log lines (its audit log) here; errors still print. */
  logs?: string[];
}

/** Keeps the PgQueueDashboard context's lines, prints errors, drops the rest. */
function collectingLogger(logs: string[]): LoggerService {
  const keep = (message: unknown, context?: unknown) => {
    if (context === 'PgQueueDashboard') logs.push(String(message));
  };
  return { log: keep, warn: keep, error: (message: unknown, ...rest: unknown[]) => console.error(message, ...rest) };
}

/** A Nest HTTP app with PgQueueModule and the dashboard, listening on a free port of 127.0.0.1. */
export async function startDashboardApp(url: string, { adapter, dashboard, queue = {}, handlers = true, providers = [], logs }: DashboardAppOptions): Promise<{ app: INestApplication; baseUrl: string }> {
  @Module({})
  class DashboardTestModule {
    static forRoot(): DynamicModule {
      return {
        module: DashboardTestModule,
        imports: [PgQueueModule.forRoot({ connection: url, pollIntervalMs: 200, ...queue }), PgQueueDashboardModule.forRoot(dashboard)],
        providers: [...(handlers ? [FlakyHandler, StepperHandler] : []), ...providers],
      };
    }
  }
  const options = { logger: logs ? collectingLogger(logs) : ['error' as const], abortOnError: false, forceCloseConnections: true };
  const app = adapter === 'fastify' ? await NestFactory.create(DashboardTestModule.forRoot(), new FastifyAdapter(), options) : await NestFactory.create(DashboardTestModule.forRoot(), options);
  await app.listen(0, '127.0.0.1');
  const address = app.getHttpServer().address() as { port: number };
  return { app, baseUrl: `http://127.0.0.1:${address.port}` };
}
