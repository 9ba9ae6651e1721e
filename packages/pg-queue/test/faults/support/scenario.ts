import type { INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { QueueService } from 'nestjs-pg-queue';
import { sqlPool, startApp } from '../../support/test-app.js';
import { createFaultTables } from './fault-db.js';
import { WorkerFleet, type FleetOptions, type ProcessPool } from './fleet.js';

/** Short leases so that faults resolve in seconds: what an app would set is 30 s (the default). */
export const FAULT_TIMINGS = {
  leaseMs: 2_000,
  heartbeatMs: 500,
  pollIntervalMs: 1_000,
  fallbackPollIntervalMs: 500,
  shutdownGraceMs: 0,
  maintenance: { sweepIntervalMs: 250 },
} as const;

/** One row of the printed table. */
export interface ScenarioRow {
  scenario: string;
  jobs: number;
  faults: string;
  lost: number;
  ranTwice: number;
  finalStates: string;
  seconds: number;
}

export interface Scenario {
  url: string;
  /** Reads back the database (and records faults). */
  db: pg.Pool;
  /** An enqueue-only instance of the module in the test process (it also ran the migrations). */
  queue: QueueService;
  fleet(queue?: FleetOptions['queue']): WorkerFleet;
  close(): Promise<void>;
}

/** A database with the queue's schema and the suite's tables, an enqueue-only app, and worker fleets on it. */
export async function openScenario(url: string, processes: ProcessPool): Promise<Scenario> {
  const db = sqlPool(url);
  db.on('error', () => undefined); // idle clients die when the restart scenario stops the server
  let app: INestApplicationContext | undefined;
  const fleets: WorkerFleet[] = [];
  try {
    app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    await createFaultTables(db);
    return {
      url,
      db,
      queue: app.get(QueueService),
      fleet: (queue = FAULT_TIMINGS) => {
        const fleet = new WorkerFleet({ processes, url, db, queue });
        fleets.push(fleet);
        return fleet;
      },
      close: async () => {
        await Promise.all(fleets.map((f) => f.killAll()));
        await app?.close();
        await db.end();
      },
    };
  } catch (error) {
    await app?.close();
    await db.end();
    throw error;
  }
}

export async function sleep(ms: number): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, ms));
}

export function formatStates(counts: Record<string, number>): string {
  return Object.entries(counts)
    .map(([status, n]) => `${n} ${status}`)
    .join(', ');
}

export function formatTable(rows: ScenarioRow[]): string {
  const header = ['scenario', 'jobs', 'faults injected', 'lost', 'run twice', 'final states', 'time'];
  const cells = rows.map((r) => [r.scenario, r.jobs.toLocaleString('en-US'), r.faults, String(r.lost), String(r.ranTwice), r.finalStates, `${r.seconds.toFixed(1)} s`]);
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i].length)));
  const line = (c: string[]) => `| ${c.map((v, i) => v.padEnd(widths[i])).join(' | ')} |`;
  return [line(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...cells.map(line)].join('\n');
}
