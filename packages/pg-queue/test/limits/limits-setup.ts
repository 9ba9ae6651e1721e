// The set-up the limits suites share (limits-processes, runtime-limits-processes, fair-share): a build of the limits
// worker (limits-worker.ts) for the file's tests, and per test a database with the run tables and an app that
// migrates and enqueues but runs no worker of its own.
import { afterAll, beforeAll } from '@jest/globals';
import { fileURLToPath } from 'node:url';
import type { INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { QueueService } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { buildWorker, type WorkerBuild } from '../faults/support/build-worker.js';
import { sqlPool, startApp } from '../support/test-app.js';
import { LIMIT_TABLES, type LimitsFleet } from './limits-fleet.js';

export const LIMITS_MAINTENANCE = { sweepIntervalMs: 200, pruneIntervalMs: 600_000 };

/** Builds the limits worker once for the calling file (beforeAll) and removes it after; the build's script, when asked. */
export function useLimitsWorkerBuild(): () => string {
  let build: WorkerBuild | undefined;
  beforeAll(async () => {
    build = await buildWorker([fileURLToPath(new URL('./limits-worker.ts', import.meta.url))]);
  });
  afterAll(async () => {
    await build?.remove();
  });
  return () => build!.script;
}

export interface LimitsSetup {
  db: pg.Pool;
  app: INestApplicationContext;
  queue: QueueService;
  url: string;
}

/** A fresh database with the run tables (and `extraSql`), and an app that migrates and enqueues, with no worker. */
export async function setUpLimits(label: string, extraSql?: string): Promise<LimitsSetup> {
  const url = await createTestDatabase(label);
  const db = sqlPool(url);
  const app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
  await db.query(LIMIT_TABLES);
  if (extraSql) await db.query(extraSql);
  return { db, app, queue: app.get(QueueService), url };
}

export async function tearDownLimits(s: LimitsSetup, fleet?: LimitsFleet): Promise<void> {
  await fleet?.killAll();
  await s.app.close();
  await s.db.end();
}
