import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createDatabase, createTestDatabase, startPostgres, type PostgresServer } from '@internal/pg-harness';
import { buildWorker, type WorkerBuild } from './support/build-worker.js';
import { ProcessPool } from './support/fleet.js';
import { FAULTS_MAX_ATTEMPTS, FAULTS_TIMEOUT_MS } from './support/fault-kinds.js';
import { formatStates, formatTable, openScenario, type Scenario, type ScenarioRow } from './support/scenario.js';
import type { Stall } from './support/stall-watch.js';
import { badHandlers } from './scenarios/bad-handlers.js';
import { freezeWorker } from './scenarios/freeze-worker.js';
import { killWorkers, type KillWorkersSize } from './scenarios/kill-workers.js';
import { restartPostgres, type RestartPostgresSize } from './scenarios/restart-postgres.js';

// The fault-injection suite: worker processes (forked, each a Nest app) against real PostgreSQL, faults
// injected on purpose, outcomes read back from the database. `npm test` runs the short version;
// PG_QUEUE_FAULTS_FULL=1 (npm run test:faults) the full one. docs/reliability.md shows both tables.
const FULL = process.env.PG_QUEUE_FAULTS_FULL === '1';

const SIZE = FULL
  ? {
      kill: { workers: 4, jobs: 20_000, killEveryMs: 1_000, maxKills: Infinity, jobMs: [5, 40] as [number, number], timeoutMs: 1_200_000, flows: 400 },
      restart: { workers: 2, jobs: 5_000, downMs: 3_000, jobMs: [5, 30] as [number, number], probes: 9, timeoutMs: 300_000 },
      bad: { workers: 2, good: 2_000, eachBad: 10, cancelled: 4, timeoutMs: 120_000 },
    }
  : {
      // Jobs of 40-100 ms: 4 x 8 slots need at least 2 s for 1,000 of them, so even a fast machine sees kills.
      kill: { workers: 4, jobs: 1_000, killEveryMs: 1_000, maxKills: 4, jobMs: [40, 100] as [number, number], timeoutMs: 120_000, flows: 40 },
      restart: { workers: 2, jobs: 800, downMs: 2_000, jobMs: [5, 30] as [number, number], probes: 7, timeoutMs: 120_000 },
      bad: { workers: 2, good: 200, eachBad: 3, cancelled: 4, timeoutMs: 60_000 },
    };

/**
 * The same kill, freeze and restart scenarios with the work queue's read-ahead set: a fixed prefetch of 490
 * (buffers far larger than the slots), and 'auto' on fast jobs (where its estimate reads far ahead). Full
 * profile only, but for one short freeze with a full buffer. A job only read ahead, never started, is not in
 * flight at a fault: running it elsewhere is its first run (the audit counts only started jobs as held).
 */
const PREFETCH_VARIANTS: { label: string; prefetch: number | 'auto'; jobMs: [number, number] }[] = [
  { label: 'prefetch 490', prefetch: 490, jobMs: [5, 40] },
  { label: "prefetch 'auto', fast jobs", prefetch: 'auto', jobMs: [1, 5] },
];
const FREEZE_SIZE = FULL
  ? { workers: 4, jobs: 10_000, killEveryMs: 1_000, maxKills: Infinity, jobMs: [20, 60] as [number, number], timeoutMs: 600_000, freezeMs: 6_000 }
  : { workers: 2, jobs: 600, killEveryMs: 500, maxKills: 1, jobMs: [40, 100] as [number, number], timeoutMs: 60_000, freezeMs: 6_000 };

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** The machine's own stalls (support/stall-watch.ts), for the table: none, the usual case, adds nothing. */
function describeStalls(stalls: readonly Stall[]): string {
  if (stalls.length === 0) return '';
  const longest = Math.max(...stalls.map((s) => s.ms));
  const held = stalls.reduce((n, s) => n + s.held, 0);
  return `; the machine stalled ${stalls.length} time(s) past half the lease (longest ${(longest / 1_000).toFixed(1)} s), ${held} jobs held then`;
}

describe(`fault injection (${FULL ? 'full' : 'short'} version)`, () => {
  let build: WorkerBuild;
  let logDir: string;
  let processes: ProcessPool;
  let privateServer: Promise<PostgresServer> | undefined;
  const rows: ScenarioRow[] = [];
  const started = performance.now();
  // Worker logs are kept for a failed scenario only: each test counts itself as passed on its last line.
  let ran = 0;
  let passed = 0;
  beforeEach(() => void ran++);

  /** Runs one scenario on its own database, and ends its workers whatever happens. */
  async function scenario<T>(url: Promise<string>, run: (s: Scenario) => Promise<T>): Promise<T> {
    const s = await openScenario(await url, processes);
    try {
      return await run(s);
    } finally {
      await s.close();
    }
  }

  beforeAll(async () => {
    // Scenario 2 restarts a server of its own (restarting the shared one would pull it from under the
    // other test files); its initdb runs meanwhile.
    privateServer = startPostgres({ url: null, containers: false });
    privateServer.catch(() => undefined); // reported by scenario 2
    build = await buildWorker();
    logDir = await mkdtemp(join(tmpdir(), 'pg-queue-faults-'));
    processes = new ProcessPool(build.script, logDir, 4);
    processes.warm();
  });
  afterAll(async () => {
    await processes?.killAll();
    await (await privateServer?.catch(() => undefined))?.stop();
    await build?.remove();
    const total = ((performance.now() - started) / 1_000).toFixed(1);
    const keepLogs = passed < ran;
    if (!keepLogs && logDir) await rm(logDir, { recursive: true, force: true });
    const logs = keepLogs ? ` (worker logs: ${logDir})` : '';
    if (rows.length) console.log(`fault injection, ${FULL ? 'full' : 'short'} version, ${total} s${logs}\n\n${formatTable(rows)}\n`);
  });

  /** Scenario 1 (SIGKILL, or SIGSTOP past the lease with `fault: 'freeze'`), with its checks. */
  async function killScenario(label: string, size: KillWorkersSize, minFaults: number): Promise<void> {
    const freeze = size.fault === 'freeze';
    const fed = size.producer === 'workers';
    const r = await scenario(createTestDatabase(`faults_${freeze ? 'freeze' : 'kill'}_${rows.length}`), (s) => killWorkers(s, size));
    rows.push({
      scenario: label,
      jobs: r.audit.jobs,
      faults: `${r.kills} ${freeze ? `SIGSTOP (${(size.freezeMs ?? 6_000) / 1_000} s)` : 'SIGKILL'}, ${r.inFlightAtKills} jobs in flight (started) at a fault${size.flows ? `; ${size.flows} flows in the mix` : ''}${fed ? `; ${r.eager} jobs started eagerly` : ''}${describeStalls(r.stalls)}`,
      lost: r.audit.lost,
      ranTwice: r.audit.ranTwice,
      finalStates: formatStates(r.states),
      seconds: r.seconds,
    });
    expect(r.kills).toBeGreaterThanOrEqual(minFaults);
    expect(r.inFlightAtKills).toBeGreaterThan(0);
    expect(r.audit.lost).toBe(0);
    // Fed by the workers, a feed redone after a fault enqueues its jobs again: more jobs, all completed.
    expect(r.states).toEqual({ completed: fed ? r.audit.jobs : size.jobs });
    if (fed) {
      expect(r.audit.jobs).toBeGreaterThanOrEqual(size.jobs);
      expect(r.eager).toBeGreaterThan(0);
    }
    // Every completion was recorded by a run of that attempt on that worker...
    expect(r.audit.completedWithoutRun).toBe(0);
    // ...every job that ran twice had started on a worker that held it when the fault hit, and ended with its final attempt.
    expect(r.audit.unexplained).toEqual([]);
    expect(r.audit.unfenced).toEqual([]);
    expect(r.audit.ranTwice).toBeLessThanOrEqual(r.inFlightAtKills + r.stalls.reduce((n, stall) => n + stall.held, 0));
    if (size.flows) {
      // Every flow ended as it must (completed, or compensated), no job ran before its parents had completed or after
      // one had failed, compensations one per completed step in reverse order, no rerun a fault does not explain.
      expect(r.flows).toMatchObject({ flows: size.flows, wrongEnd: [], early: [], ranAfterParentFailed: [], wrongCompensations: [], unexplainedReruns: [] });
    }
    passed++;
  }

  it(`1. SIGKILL a random one of ${SIZE.kill.workers} worker processes every second: no job lost, every double run explained`, async () => {
    await killScenario(`1. SIGKILL a random worker every ${SIZE.kill.killEveryMs / 1_000} s, restart it (${SIZE.kill.workers} processes)`, SIZE.kill, FULL ? 10 : 2);
  }, SIZE.kill.timeoutMs + 60_000);

  if (FULL) {
    for (const v of PREFETCH_VARIANTS) {
      const size = { ...SIZE.kill, jobs: 10_000, jobMs: v.jobMs, prefetch: v.prefetch };
      it(`1. (${v.label}) SIGKILL a random worker every second: no job lost, only started jobs run twice`, async () => {
        await killScenario(`1. SIGKILL a random worker every ${size.killEveryMs / 1_000} s, ${v.label} (${size.workers} processes)`, size, 3);
      }, size.timeoutMs + 60_000);
    }
  }

  // Eager start under faults: the workers enqueue their own jobs one call at a time, so that most start from their
  // insert in the process that enqueued them; SIGKILL (and, in the full version, SIGSTOP past the lease) hits them.
  const FED = { ...SIZE.kill, jobs: FULL ? 4_000 : 1_000, producer: 'workers' as const, feedGapMs: 10, flows: 0 };
  it(`1. (jobs enqueued by the workers, started eagerly) SIGKILL a random worker every second: no job lost, only started jobs run twice`, async () => {
    await killScenario(`1. SIGKILL a random worker every ${FED.killEveryMs / 1_000} s, jobs enqueued by the workers one call at a time (${FED.workers} processes)`, FED, FULL ? 3 : 2);
  }, FED.timeoutMs + 60_000);
  if (FULL) {
    it(`1. (jobs enqueued by the workers, started eagerly) SIGSTOP a worker past its lease, then SIGCONT: no job lost, only started jobs run twice`, async () => {
      const size = { ...FED, fault: 'freeze' as const, freezeMs: FREEZE_SIZE.freezeMs, maxKills: Infinity };
      await killScenario(`1. SIGSTOP a worker ${size.freezeMs / 1_000} s, jobs enqueued by the workers one call at a time (${size.workers} processes)`, size, 1);
    }, FED.timeoutMs + 60_000);
  }

  it(`1. (prefetch 490) SIGSTOP a worker with a full buffer past its lease, then SIGCONT: no job lost, only started jobs run twice`, async () => {
    const size = { ...FREEZE_SIZE, fault: 'freeze' as const, prefetch: 490 };
    await killScenario(`1. SIGSTOP a worker ${size.freezeMs / 1_000} s with a full buffer, prefetch 490 (${size.workers} processes)`, size, 1);
  }, FREEZE_SIZE.timeoutMs + 60_000);

  if (FULL) {
    it("1. (prefetch 'auto', fast jobs) SIGSTOP a worker past its lease, then SIGCONT: no job lost, only started jobs run twice", async () => {
      const size = { ...FREEZE_SIZE, fault: 'freeze' as const, prefetch: 'auto' as const, jobMs: [1, 5] as [number, number] };
      await killScenario(`1. SIGSTOP a worker ${size.freezeMs / 1_000} s, prefetch 'auto', fast jobs (${size.workers} processes)`, size, 1);
    }, FREEZE_SIZE.timeoutMs + 60_000);
  }

  /** Scenario 2, with its checks; `prefetch`: the work queue's read-ahead. */
  async function restartScenario(size: RestartPostgresSize, label = ''): Promise<void> {
    const server = await privateServer!;
    const r = await scenario(createDatabase(server.url, `faults_restart_${rows.length}`), (s) => restartPostgres(s, server, size));
    const p50 = median(r.probeMs);
    rows.push({
      scenario: `2. restart PostgreSQL (down ${(r.outageMs / 1_000).toFixed(1)} s) mid-run${label} (${size.workers} processes)`,
      jobs: r.audit.jobs,
      faults: `1 restart at ${r.completedBeforeRestart} done; LISTEN back ${Math.round(r.listenersBackMs)} ms and backlog resumed ${Math.round(r.workResumedMs)} ms after; new job started in ${p50.toFixed(0)} ms (median of ${r.probeMs.length})${size.producer === 'workers' ? `; ${r.eager} jobs started eagerly` : ''}`,
      lost: r.audit.lost,
      ranTwice: r.audit.ranTwice,
      finalStates: formatStates(r.states),
      seconds: r.seconds,
    });
    expect(r.audit.lost).toBe(0);
    const fed = size.producer === 'workers';
    expect(r.states).toEqual({ completed: fed ? r.audit.jobs : size.jobs });
    if (fed) {
      expect(r.audit.jobs).toBeGreaterThanOrEqual(size.jobs);
      expect(r.eager).toBeGreaterThan(0);
    }
    expect(r.audit.completedWithoutRun).toBe(0);
    // A run may be redone here (an outcome that could not be written, its lease expired meanwhile), but only
    // a run started before the server was back, and the outcome is always the final attempt's.
    expect(r.audit.unexplained).toEqual([]);
    expect(r.audit.unfenced).toEqual([]);
    // Polling is a minute apart: only the reconnected listener can wake a worker this fast.
    expect(p50).toBeLessThan(100);
    expect(Math.max(...r.probeMs)).toBeLessThan(5_000);
    passed++;
  }

  it('2. restart PostgreSQL mid-run: every job completes, the listener comes back, NOTIFY wakes a worker within 100 ms', async () => {
    await restartScenario(SIZE.restart);
  }, SIZE.restart.timeoutMs + 60_000);

  if (FULL) {
    for (const v of PREFETCH_VARIANTS) {
      it(`2. (${v.label}) restart PostgreSQL mid-run: every job completes, only started jobs run twice`, async () => {
        await restartScenario({ ...SIZE.restart, jobMs: v.jobMs, prefetch: v.prefetch }, `, ${v.label}`);
      }, SIZE.restart.timeoutMs + 60_000);
    }
    it('2. (jobs enqueued by the workers, started eagerly) restart PostgreSQL mid-run: every job completes, only started jobs run twice', async () => {
      await restartScenario({ ...SIZE.restart, jobs: 2_000, producer: 'workers' }, ', jobs enqueued by the workers one call at a time');
    }, SIZE.restart.timeoutMs + 60_000);
  }

  it('3. freeze a worker past its lease: the job moves to another worker, the frozen one’s late outcomes are rejected', async () => {
    const r = await scenario(createTestDatabase('faults_freeze'), freezeWorker);
    rows.push({
      scenario: '3. SIGSTOP a worker past its lease, SIGCONT after the sweeper moved its jobs (2 processes)',
      jobs: r.jobs.length,
      faults: `1 SIGSTOP for ${(r.frozenMs / 1_000).toFixed(1)} s holding ${r.held} jobs; late success + late failure`,
      lost: r.audit.lost,
      ranTwice: r.audit.ranTwice,
      finalStates: `${formatStates(r.states)} (attempt 2, by ${r.rescuer})`,
      seconds: r.seconds,
    });
    expect(r.held).toBe(2);
    for (const job of r.jobs) {
      // Exactly one outcome: the rescuer's, on attempt 2...
      expect(job).toMatchObject({ status: 'completed', attempts: 2, lockedBy: r.rescuer });
      expect(job.runs).toEqual([
        { attempt: 1, worker: r.frozen, result: job.fail ? 'threw late' : 'returned late' },
        { attempt: 2, worker: r.rescuer, result: 'completed' },
      ]);
      // ...and the frozen worker's late outcome, settled after that, wrote nothing: the row's last change predates it.
      expect(job.updatedAt.getTime()).toBeLessThan(job.lateOutcomeAt.getTime());
    }
    expect(r.audit.unexplained).toEqual([]);
    expect(r.audit.unfenced).toEqual([]);
    // Both late outcomes reached the database (they go out on resume, before any heartbeat), were refused by
    // the fenced statements, and the frozen worker logged it.
    for (const job of r.jobs) {
      expect(r.frozenLog).toContain(`job ${job.id} (freeze) ${job.fail ? 'failed' : 'finished'} on ${r.frozen}, but it no longer held the job: outcome discarded`);
    }
    passed++;
  }, 120_000);

  it('4. handlers that hang, throw junk or time out, mixed with good ones: good jobs unaffected, bad ones end by the rules', async () => {
    const r = await scenario(createTestDatabase('faults_bad'), (s) => badHandlers(s, SIZE.bad));
    const bad = Object.values(r.kinds).filter((k) => k.kind !== 'ok').reduce((n, k) => n + k.jobs, 0);
    rows.push({
      scenario: `4. bad handlers mixed with good ones (${SIZE.bad.workers} processes, timeoutMs ${FAULTS_TIMEOUT_MS}, maxAttempts ${FAULTS_MAX_ATTEMPTS})`,
      jobs: r.jobs,
      faults: `${bad} bad (${Object.keys(r.kinds).length - 1} kinds), ${SIZE.bad.cancelled} hung jobs cancelled`,
      lost: 0,
      ranTwice: r.goodRanTwice,
      finalStates: `${formatStates(r.states)}, ${r.cancel.ends.cancelled ?? 0} cancelled; good jobs ran ${Math.round(r.goodMs.p50)} ms p50, ${Math.round(r.goodMs.max)} ms max`,
      seconds: r.seconds,
    });
    const { good, eachBad } = SIZE.bad;
    // Nothing reached a worker process's uncaughtException / unhandledRejection.
    expect(r.crashes).toEqual([]);
    // Good jobs: completed on their first and only run.
    expect(r.kinds.ok).toMatchObject({ jobs: good, ends: { 'completed/1': good }, runsPerJob: [1] });
    expect(r.goodRanTwice).toBe(0);
    // Junk thrown: retried to maxAttempts, then dead-lettered with a readable last_error.
    const junk = {
      'throw-string': 'a plain string',
      'throw-null': 'Error: handler rejected with null',
      'throw-number': 'non-Error thrown: 42',
      'reject-circular': "non-Error thrown: <ref *1> { name: 'loop', self: [Circular *1] }",
      'throw-sync': 'RangeError: thrown synchronously',
      // Junk that once crashed the worker's process (issue 17, item 9).
      'stack-not-string': 'Error: its stack is a number',
      'name-symbol': 'Symbol(junk): its name is a Symbol',
      'throw-revoked': 'non-Error thrown: <Revoked Proxy>',
      'throw-symbol': 'non-Error thrown: Symbol(thrown)',
      // Thenables returned as they are: a then() or a then getter that throws is a rejection; the first call wins.
      'then-throws': 'Error: then() threw synchronously',
      'then-getter-throws': 'Error: the then getter threw',
      'then-both': 'Error: rejected first',
      'then-rejects-revoked': 'non-Error thrown: <Revoked Proxy>',
      // Past timeoutMs, whether the handler ignores its signal or honours it: a timeout, retried like any failure.
      hang: `JobTimeoutError: job timed out after ${FAULTS_TIMEOUT_MS} ms`,
      abortable: `JobTimeoutError: job timed out after ${FAULTS_TIMEOUT_MS} ms`,
    };
    for (const [kind, lastError] of Object.entries(junk)) {
      expect(r.kinds[kind]).toMatchObject({
        jobs: eachBad,
        ends: { [`failed/${FAULTS_MAX_ATTEMPTS}`]: eachBad },
        runsPerJob: [FAULTS_MAX_ATTEMPTS],
        lastErrors: [lastError],
      });
    }
    // A result that cannot be stored (its toJSON throws a revoked Proxy): refused, failed for good on attempt 1.
    expect(r.kinds['result-revoked']).toMatchObject({ jobs: eachBad, ends: { 'failed/1': eachBad }, runsPerJob: [1] });
    expect(r.kinds['result-revoked'].lastErrors).toEqual(
      Array(eachBad).fill(expect.stringMatching(/^job \d+ \(faults\): the handler's result cannot be stored: it is not JSON \(non-Error thrown: <Revoked Proxy>\)/)),
    );
    // Timed out once, then quick: the retry completes it; the late result of attempt 1 changed nothing.
    expect(r.kinds['slow-once']).toMatchObject({ jobs: eachBad, ends: { 'completed/2': eachBad }, runsPerJob: [2] });
    // Cancelled while running and ignoring the signal: cancelled for good, the signal aborted, the slots freed.
    expect(r.cancel.results).toEqual(['cancelled']);
    expect(r.cancel.ends).toEqual({ cancelled: SIZE.bad.cancelled });
    // The NOTIFY on pg_queue_cancel usually tells the worker first; a heartbeat landing just before it finds
    // the row no longer ours and aborts with "lease lost" instead. Either way the signal is aborted; with several
    // jobs cancelled at once, some may end one way and some the other (CI saw both in one run).
    expect(r.cancel.runResults.length).toBeGreaterThan(0);
    expect(r.cancel.runResults.filter((result) => !/^signal aborted: JobAbortedError: (job was cancelled|lease lost: .*cancelled)/.test(result))).toEqual([]);
    expect(r.cancel.afterwards).toEqual({ cancelled: SIZE.bad.cancelled, completed: SIZE.bad.cancelled * 2 });
    passed++;
  }, SIZE.bad.timeoutMs + 60_000);
});
