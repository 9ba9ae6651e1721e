// One run of the simulation (issue 40): the plan of a seed (generator.ts) played against real processes on one
// database, then the invariants (invariants.ts) read from what the tables and the run log hold. `npm run test:sim
// -- --seed N --minutes M` runs it (sim-cli.mjs starts Jest on sim.spec.ts, which calls runSim; Jest's global
// setup gives it a PostgreSQL); so does CI, for a fixed budget with a fresh seed. Every run prints its seed first;
// a failing run prints the seed, each invariant broken with its jobs' history and run-log rows, and the replay
// command.
import * as invLifo from './invariants-lifo.js';
import { addedJobsAsAsked } from './invariants-forms.js';
import { mkdtemp, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { QueueService } from 'nestjs-pg-queue';
import { MaintenanceScheduler } from '../../src/internal.js';
import { startPgBouncer, withDatabaseName, type PgBouncer, type PostgresServer } from '@internal/pg-harness';
import { buildWorker } from '../faults/support/build-worker.js';
import { createFaultTables } from '../faults/support/fault-db.js';
import { sqlPool, startApp } from '../support/test-app.js';
import { SimProcesses, sleep } from './faults.js';
import { FAIR_QUEUE, generatePlan, HANDLER_KIND_QUEUES, LIMITED_QUEUES, planShares, RATED_QUEUE, SIM_QUEUES, type SimPlan, type Step } from './generator.js';
import * as invHandlers from './invariants-handlers.js';
import { fairKeylessFound, fairNotOvertaken, fairPerKeyHeld } from './invariants-fair.js';
import { logsBelongToRuns } from './invariants-logs.js';
import { metricsMatchRows } from './invariants-metrics.js';
import { eventsMatchRows, SimEventConsumer } from './invariants-events.js';
import { rateLimitHeld } from './invariants-rate.js';
import { everyFires, recurringFires, type EverySchedule } from './invariants-recurring.js';
import { waitsMatchRows } from './invariants-waits.js';
import * as inv from './invariants.js';
import { act, EDITED_SCHEDULE } from './operator.js';
import { editedScheduleFires } from './invariants-schedule-edits.js';
import { SIM_TABLES } from './tables.js';
import { globalLimitOf, rateLimitedBlocks } from './invariants-runtime-limits.js';
import { nothingStartsWhilePaused } from './invariants-pause.js';

const WORKER_SOURCES = [fileURLToPath(new URL('./sim-worker.ts', import.meta.url)), fileURLToPath(new URL('./sim-worker-records.ts', import.meta.url)), fileURLToPath(new URL('./sim-cpu.thread.ts', import.meta.url))];
/** Steps in flight at once; a step that would exceed it waits (the plan's clock then runs late, which is recorded). */
const MAX_IN_FLIGHT = 8;
/** How long the end waits for every job to be final or legitimately waiting. */
const DRAIN_MS = 90_000;
/** A process must exit this long after its grace on SIGTERM (a loaded 2-core machine closes pools slowly). */
const EXIT_SLACK_MS = 5_000;

export interface SimResult {
  seed: number;
  violations: inv.Violation[];
  report: string;
}

export const replayCommand = (seed: number, minutes: number) => `npm run test:sim -- --seed ${seed} --minutes ${minutes}`;

const out = (text: string) => process.stdout.write(`${text}\n`);

/**
 * `server`: the PostgreSQL `url`'s database lives on, when the simulation started it for itself (sim.spec.ts): its
 * restart is one of the faults. Without one (a server given by URL), the plan's restarts are skipped.
 */
export async function runSim(url: string, seed: number, minutes: number, server?: PostgresServer): Promise<SimResult> {
  const plan = generatePlan(seed, minutes);
  out(`sim: seed ${seed}, ${minutes} min, ${plan.processes.length} processes, ${plan.steps.length} steps (replay: ${replayCommand(seed, minutes)})`);
  const build = await buildWorker(WORKER_SOURCES);
  const outDir = join(dirname(build.script), '..', '..');
  const cli = join(outDir, 'src', 'cli', 'main.js');
  await symlink(fileURLToPath(new URL('../../node_modules', import.meta.url)), join(outDir, 'node_modules'), 'dir');
  const logDir = await mkdtemp(join(tmpdir(), `pg-queue-sim-${seed}-`));
  let host: INestApplicationContext | undefined;
  const db = sqlPool(url);
  // A restart of the server ends the pool's idle sessions: the next query opens new ones.
  db.on('error', () => undefined);
  let processes: SimProcesses | undefined;
  let bouncer: PgBouncer | undefined;
  let consumerOf: SimEventConsumer | undefined;
  try {
    // The host fires no schedule (recurring off): the faulted processes do, and the enqueuing one.
    // With partitioned history in the plan, the host has it too: its mover is the operator's `history-move`.
    const history = plan.history ? { history: { partitionWidth: 'hour' as const, moveAfterMs: plan.history.moveAfterMs } } : {};
    host = await startApp(url, { queue: { workers: false, maintenance: { enabled: false, ...history }, recurring: { enabled: false } } });
    const mover = host.get(MaintenanceScheduler).historyMover;
    const moveHistory = mover ? async () => (await mover.runOnce()).moved : undefined;
    await createFaultTables(db);
    await db.query(SIM_TABLES);
    const queue = host.get(QueueService);
    // The event stream (issue 43): its queues record from the start; the consumer reads (and restarts once) all along.
    for (const q of plan.events.queues) await queue.recordEvents(q);
    const consumer = new SimEventConsumer(queue, plan.events.restartAfter);
    consumerOf = consumer;
    if (plan.pgbouncer) bouncer = await startPgBouncer(server?.url ?? process.env.PG_QUEUE_TEST_SERVER_URL!, { poolMode: 'transaction', poolSize: 40 });
    const bounced = bouncer ? withDatabaseName(bouncer.url, new URL(url).pathname.slice(1)) : undefined;
    processes = await SimProcesses.create(build.script, logDir, url, db, plan.processes, bounced);
    await processes.startAll();
    const every = await makeEvery(db, queue, plan);
    await queue.upsertSchedule(EDITED_SCHEDULE);
    const played = await play(plan, { db, url, queue, processes, cli, workerSlots: plan.processes.slice(1).map((p) => p.slot), moveHistory }, server);
    // The end: every queue resumed, no new fault; the jobs drain.
    for (const q of [...SIM_QUEUES, ...LIMITED_QUEUES, ...HANDLER_KIND_QUEUES, RATED_QUEUE, FAIR_QUEUE, 'tick']) await queue.resume(q);
    const drained = await drain(db);
    const metrics = await processes.readMetrics();
    out(`sim: metrics: the job counters of ${metrics.map((m) => m.worker).join(', ') || 'no process'}`);
    const exits = await processes.terminateAll(EXIT_SLACK_MS);
    await consumer.finish(db);
    out(`sim: events: the consumer received ${consumer.seen.length} (restarted ${consumer.restarts} time(s)), of queues ${plan.events.queues.join(', ')}`);
    const leaseOf = (worker: string) => plan.processes.find((p) => p.slot === worker.split('.')[0])?.leaseMs ?? 30_000;
    const facts = await inv.loadFacts(db, leaseOf);
    const violations = [
      ...inv.runsExplained(facts),
      ...inv.cancelTakesNoStarted(facts),
      ...inv.replaceSparesRunning(facts),
      ...(await inv.attemptsCharged(db, facts)),
      ...inv.priorityWithinClaims(facts),
      ...inv.limitsHeld(facts, await globalLimitOf(db, plan.globalConcurrency)),
      ...(await rateLimitedBlocks(db)),
      ...(await nothingStartsWhilePaused(db)),
      ...(await rateLimitHeld(db, plan.rateLimit)),
      ...fairPerKeyHeld(facts, plan.fair.perKey),
      ...(await fairNotOvertaken(db, plan.fair)),
      ...(await fairKeylessFound(db, plan.fair)),
      ...(await recurringFires(db, drained.at)),
      ...(await everyFires(db, every, drained.at)),
      ...(await editedScheduleFires(db, EDITED_SCHEDULE.every, drained.at)),
      ...(await waitsMatchRows(db, drained.at)),
      ...played.uniqueViolations,
      ...(await inv.uniqueKeysHeldOnce(db)),
      ...(await invLifo.successorsOnce(db)),
      ...(await invLifo.successorsStartAfterHolders(db)),
      ...(await addedJobsAsAsked(db)),
      ...(await inv.flowOrder(db, facts)),
      ...(await inv.flowPromises(db, facts)),
      ...inv.flowPrunedWhileLive(facts),
      ...(await inv.stepsRunOnce(db, facts)),
      ...(await invHandlers.transactionalRowsMatch(db)),
      ...(await invHandlers.batchOutcomes(db, facts)),
      ...(await invHandlers.resultsKept(db)),
      ...(await logsBelongToRuns(db, plan.logs)),
      ...(await invHandlers.threadOutcomes(db, facts)),
      ...(await eventsMatchRows(db, consumer, plan.events.queues)),
      ...(await metricsMatchRows(db, metrics)),
      ...(await inv.noCrash(db)),
      ...exits.map((e) => ({ invariant: 'process.exit-past-grace', jobIds: [], detail: `${e.worker} took ${e.ms} ms to exit on SIGTERM (${e.how}; grace ${e.graceMs} ms + ${EXIT_SLACK_MS} ms)` })),
      ...(await inv.noJobLost(db, (id) => queue.whyNotRunning(id), drained.at)),
      ...drained.processing,
    ];
    const report = await describe(db, plan, played, drained, processes, facts, violations, logDir);
    out(report);
    return { seed, violations, report };
  } finally {
    await consumerOf?.close();
    await processes?.killAll();
    await bouncer?.stop();
    await host?.close();
    await db.end();
    await build.remove();
  }
}

/**
 * The runtime schedule `every` (issue 43): an interval with a limit, a start and an end from the database clock, and a
 * payload template, into queue `tick` (whose handler every process has). Made once the processes run; fired by them.
 */
async function makeEvery(db: pg.Pool, queue: QueueService, plan: SimPlan): Promise<EverySchedule> {
  const now = (await db.query<{ now: Date }>('SELECT now()')).rows[0].now.getTime();
  const startDate = new Date(now + plan.every.startMs);
  const endDate = new Date(now + plan.every.endMs);
  await queue.upsertSchedule({ name: 'every', queue: 'tick', every: plan.every.everyMs, limit: plan.every.limit, startDate, endDate, payload: { b: 'ok', ms: 1, n: 0, at: '{{fireAt}}' } });
  return { everyMs: plan.every.everyMs, limit: plan.every.limit, startDate, endDate };
}

interface Played {
  ms: number;
  late: number;
  errors: Map<string, number>;
  notes: Map<string, number>;
  uniqueViolations: inv.Violation[];
}

async function play(plan: SimPlan, deps: Parameters<typeof act>[0], server: PostgresServer | undefined): Promise<Played> {
  let start = Date.now();
  const played: Played = { ms: 0, late: 0, errors: new Map(), notes: new Map(), uniqueViolations: [] };
  const inFlight = new Set<Promise<void>>();
  const count = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1);
  const seenKeys = new Set<string>();
  let nextSample = 0;
  for (const step of plan.steps) {
    const wait = start + step.at - Date.now();
    if (wait > 0) await sleep(wait);
    else if (wait < -1_000) played.late += 1;
    while (inFlight.size >= MAX_IN_FLIGHT) await Promise.race(inFlight);
    if (step.type === 'fault' && step.kind === 'restart') {
      // Nothing in flight across the restart, and nothing sent until the server is back; the rest of the plan keeps
      // its spacing (its clock moves on by the restart's time).
      await Promise.all(inFlight);
      const t = Date.now();
      const done = await deps.processes.restartServer(server, step.holdMs).catch((error: unknown) => {
        count(played.errors, `fault:restart: ${(error as Error).message}`);
        return true;
      });
      if (!done) count(played.notes, 'fault:restart: skipped (a server given by URL)');
      start += Date.now() - t;
      continue;
    }
    const task = runStep(step, deps).then(
      (note) => void count(played.notes, `${step.type}:${step.kind}${note ? `: ${note}` : ''}`),
      (error: unknown) => void count(played.errors, `${step.type}:${step.kind}: ${(error as Error).message?.split('\n')[0].slice(0, 160)}`),
    );
    inFlight.add(task);
    void task.finally(() => inFlight.delete(task));
    if (Date.now() >= nextSample) {
      nextSample = Date.now() + 2_000;
      for (const v of [...(await inv.uniqueKeysHeldOnce(deps.db)), ...(await invLifo.successorsOnce(deps.db))]) {
        if (!seenKeys.has(v.detail)) played.uniqueViolations.push(v);
        seenKeys.add(v.detail);
      }
    }
  }
  await Promise.all(inFlight);
  played.ms = Date.now() - start;
  return played;
}

async function runStep(step: Step, deps: Parameters<typeof act>[0]): Promise<string | undefined> {
  if (step.type === 'enqueue') {
    await deps.processes.ask('e', { op: 'enqueue', kind: step.kind, jobs: step.jobs, flow: step.flow });
    return undefined;
  }
  if (step.type === 'operator') {
    const note = await act(deps, step.kind, step.pick, step.holdMs);
    return note.includes('skipped') || note.includes('nothing') || note.includes('no live') ? 'skipped' : undefined;
  }
  const slot = `w${step.target}`;
  const p = deps.processes;
  const done =
    step.kind === 'kill' ? await p.kill(slot, Math.round(step.holdMs / 3))
    : step.kind === 'stop' ? await p.freeze(slot, step.holdMs)
    : step.kind === 'stall' ? await p.freezeAll(step.holdMs)
    : step.kind === 'cut' ? await p.cut(slot)
    : await p.blackhole(slot, step.holdMs);
  return done ? undefined : 'skipped (slot busy)';
}

/**
 * Waits until no job is due and unclaimed or held; past DRAIN_MS, only while the backlog still shrinks (a plan heavier
 * than the drain: seeds 15 and 31 left `prio`, one slot per process with jobs of seconds, draining when it stopped),
 * and never past four times DRAIN_MS. Returns the jobs still processing then.
 */
async function drain(db: pg.Pool): Promise<{ ms: number; left: number; at: string; processing: inv.Violation[] }> {
  const start = Date.now();
  let least = Infinity;
  let shrankAt = start;
  for (;;) {
    const { rows } = await db.query<{ n: number; at: string }>(
      `SELECT count(*)::int AS n, clock_timestamp()::text AS at FROM background_jobs WHERE (status = 'queued' AND run_at <= now()) OR status = 'processing'`,
    );
    const now = Date.now();
    if (rows[0].n < least) [least, shrankAt] = [rows[0].n, now];
    const over = now - start > DRAIN_MS && (now - shrankAt > DRAIN_STALL_MS || now - start > 4 * DRAIN_MS);
    if (rows[0].n === 0 || over) return { ms: now - start, left: rows[0].n, at: rows[0].at, processing: await inv.processingAfterDrain(db) };
    await sleep(500);
  }
}

/** Past DRAIN_MS, the drain goes on while its backlog shrank within this long. */
const DRAIN_STALL_MS = 15_000;

async function describe(db: pg.Pool, plan: SimPlan, played: Played, drained: { ms: number; left: number }, processes: SimProcesses, facts: inv.Facts, violations: inv.Violation[], logDir: string): Promise<string> {
  const { rows: statuses } = await db.query<{ status: string; n: number }>(`SELECT status::text, count(*)::int AS n FROM background_jobs GROUP BY 1 ORDER BY 1`);
  const { rows: flows } = await db.query<{ status: string; n: number }>(`SELECT status, count(*)::int AS n FROM background_flows GROUP BY 1 ORDER BY 1`);
  const { rows: faults } = await db.query<{ signal: string; n: number }>(`SELECT signal, count(*)::int AS n FROM fault_faults GROUP BY 1 ORDER BY 1`);
  const lines = [
    `sim: seed ${plan.seed}: played ${plan.steps.length} steps in ${(played.ms / 1000).toFixed(0)} s (${played.late} more than 1 s late), drained in ${(drained.ms / 1000).toFixed(0)} s (${drained.left} left)`,
    `  processes (global concurrency of lim: ${plan.globalConcurrency}; rate limit of rated: ${plan.rateLimit.max} per ${plan.rateLimit.intervalMs} ms): ${plan.processes.map((p) => `${p.slot} lease ${p.leaseMs} pool ${p.poolSize} ${Object.entries(p.queues).map(([q, o]) => `${q}[c${o!.concurrency} p${o!.prefetch} ${o!.eagerStart ? 'eager' : 'lazy'} a${o!.maxAttempts} t${o!.timeoutMs}]`).join(' ')}`).join('; ')}`,
    `  plan: ${JSON.stringify(planShares(plan))}`,
    `  jobs: ${statuses.map((s) => `${s.status} ${s.n}`).join(', ')}; flows: ${flows.map((s) => `${s.status} ${s.n}`).join(', ') || 'none'}; runs: ${facts.runs.length}`,
    `  faults recorded: ${faults.map((f) => `${f.signal} ${f.n}`).join(', ') || 'none'}; injected: ${JSON.stringify(processes.injected)}; machine stalls: ${processes.stalls()}`,
    ...(played.errors.size ? [`  step errors: ${[...played.errors].map(([k, n]) => `${n}x ${k}`).join('; ')}`] : []),
    `  logs: ${logDir}`,
  ];
  if (violations.length === 0) {
    lines.push(`sim: seed ${plan.seed}: every invariant held`);
    return lines.join('\n');
  }
  const byInvariant = new Map<string, inv.Violation[]>();
  for (const v of violations) byInvariant.set(v.invariant, [...(byInvariant.get(v.invariant) ?? []), v]);
  lines.push(`sim: seed ${plan.seed}: FAILED: ${[...byInvariant].map(([k, vs]) => `${k} (${vs.length})`).join(', ')}`);
  for (const [name, vs] of byInvariant) {
    lines.push(`invariant broken: ${name}: ${vs.length} violation(s); the first ones:`);
    for (const v of vs.slice(0, 3)) {
      lines.push(`  - jobs ${v.jobIds.join(', ') || '(none)'}: ${v.detail}`);
      if (v.jobIds.length) lines.push(await inv.historyOf(db, v.jobIds.slice(0, 4)));
    }
  }
  lines.push(`replay: ${replayCommand(plan.seed, plan.minutes)}`);
  return lines.join('\n');
}
