import { afterAll, beforeAll } from '@jest/globals';
import { Module, type DynamicModule, type INestApplicationContext, type LogLevel, type Provider, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import pg from 'pg';
import { PgQueueModule, type PgQueueModuleOptions } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';

export interface TestAppOptions {
  providers?: Provider[];
  imports?: (Type | DynamicModule)[];
  /** forRoot options; `connection` defaults to the test database. */
  queue?: PgQueueModuleOptions;
  logLevels?: LogLevel[];
}

/** A Nest application context with PgQueueModule on the given database, as an app would set it up. */
export async function startApp(url: string, { providers = [], imports, queue = {}, logLevels = ['error'] }: TestAppOptions = {}): Promise<INestApplicationContext> {
  @Module({
    imports: imports ?? [PgQueueModule.forRoot({ connection: url, ...queue })],
    providers,
  })
  class TestAppModule {}
  const app = await NestFactory.createApplicationContext(TestAppModule, { logger: logLevels, abortOnError: false });
  await app.init();
  return app;
}

/** Plain pg pool for reading back what the database holds. */
export function sqlPool(url: string): pg.Pool {
  return new pg.Pool({ connectionString: url, max: 4 });
}

export async function waitFor<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 20_000, everyMs = 20): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

export async function statusCounts(pool: pg.Pool, queue?: string): Promise<Record<string, number>> {
  const { rows } = await pool.query<{ status: string; n: number }>(
    `SELECT status, count(*)::int AS n FROM background_jobs WHERE $1::text IS NULL OR queue_name = $1 GROUP BY status`,
    [queue ?? null],
  );
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

export interface TestContext {
  url: string;
  app: INestApplicationContext;
  /** For reading back what the database holds (and for handlers that record their runs). */
  db: pg.Pool;
}

/**
 * The usual set-up of a test file: beforeAll makes a fresh database, runs `prepare` on it (extra tables),
 * boots the app; afterAll closes both. The returned object is filled in once beforeAll has run.
 */
export function useTestApp(label: string, options: TestAppOptions | ((url: string) => TestAppOptions) = {}, prepare?: (db: pg.Pool) => Promise<unknown>): TestContext {
  const ctx = {} as TestContext;
  beforeAll(async () => {
    ctx.url = await createTestDatabase(label);
    ctx.db = sqlPool(ctx.url);
    await prepare?.(ctx.db);
    ctx.app = await startApp(ctx.url, typeof options === 'function' ? options(ctx.url) : options);
  });
  afterAll(async () => {
    await ctx.app?.close();
    await ctx.db?.end();
  });
  return ctx;
}
