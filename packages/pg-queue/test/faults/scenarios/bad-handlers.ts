import { waitFor } from '../../support/test-app.js';
import { countWhere, statusCounts } from '../support/fault-db.js';
import { type Scenario } from '../support/scenario.js';
import { FAULTS_MAX_ATTEMPTS, type FaultKind } from '../support/fault-kinds.js';

export interface BadHandlersSize {
  workers: number;
  good: number;
  /** Jobs of each bad kind. */
  eachBad: number;
  /** Signal-ignoring jobs on the `hangs` queue that only cancellation ends: fills every slot of that queue. */
  cancelled: number;
  timeoutMs: number;
}

export interface KindOutcome {
  kind: string;
  jobs: number;
  /** status/attempts -> count, e.g. { 'failed/3': 4 }. */
  ends: Record<string, number>;
  runsPerJob: number[];
  lastErrors: string[];
}

export interface BadHandlersResult {
  kinds: Record<string, KindOutcome>;
  /** Good jobs, from handler start to completion recorded (database clock): what a bad neighbour could slow down. */
  goodMs: { p50: number; max: number };
  /** Good jobs whose handler ran more than once. */
  goodRanTwice: number;
  cancel: { results: string[]; ends: Record<string, number>; runResults: string[]; afterwards: Record<string, number> };
  states: Record<string, number>;
  /** What reached a worker process's uncaughtException / unhandledRejection ("worker event: first line"). */
  crashes: string[];
  jobs: number;
  seconds: number;
}

const BAD: FaultKind[] = [
  'throw-string', 'throw-null', 'throw-number', 'reject-circular', 'throw-sync',
  'stack-not-string', 'name-symbol', 'throw-revoked', 'throw-symbol',
  'then-throws', 'then-getter-throws', 'then-both', 'then-rejects-revoked', 'result-revoked',
  'hang', 'abortable', 'slow-once',
];

/**
 * Scenario 4: good jobs mixed, in random order, with handlers that throw junk (or return thenables that
 * misbehave), hang ignoring their signal, run past timeoutMs, or time out once and then succeed; then signal-ignoring jobs that fill every slot of
 * a queue are cancelled, and that queue must go on working.
 */
export async function badHandlers(s: Scenario, size: BadHandlersSize): Promise<BadHandlersResult> {
  const t0 = performance.now();
  const fleet = s.fleet();
  await Promise.all(Array.from({ length: size.workers }, (_, i) => fleet.start(`bad-w${i + 1}`)));

  const kinds: FaultKind[] = [...Array<FaultKind>(size.good).fill('ok'), ...BAD.flatMap((k) => Array<FaultKind>(size.eachBad).fill(k))];
  kinds.sort(() => Math.random() - 0.5);
  // maxAttempts is stored on the row at enqueue, and this enqueue-only instance has no @JobHandler to read it from.
  await s.queue.enqueueMany(kinds.map((kind) => ({ queue: 'faults', payload: { kind }, maxAttempts: FAULTS_MAX_ATTEMPTS })));
  const settled = () => countWhere(s.db, `SELECT 1 FROM background_jobs WHERE queue_name = 'faults' AND status IN ('completed', 'failed')`);
  const crashes = async () => {
    const { rows } = await s.db.query<{ line: string }>(`SELECT worker || ' ' || event || ': ' || split_part(error, E'\n', 1) AS line FROM fault_crashes ORDER BY at`);
    return rows.map((r) => r.line);
  };
  await waitFor(
    'every faults job settled for good',
    async () => {
      // A worker process that crashed leaves its jobs to the sweeper and the next crash: say so at once.
      const crashed = await crashes();
      if (crashed.length) throw new Error(`a handler's junk reached a worker process:\n${crashed.join('\n')}`);
      return (await settled()) === kinds.length;
    },
    size.timeoutMs,
    100,
  );

  // Cancellation of running handlers that ignore their signal, enough to take every slot of the queue.
  const hung = await s.queue.enqueueMany(Array.from({ length: size.cancelled }, () => ({ queue: 'hangs', payload: { hang: true }, maxAttempts: 1 })));
  await waitFor('every hangs slot taken', async () => (await countWhere(s.db, `SELECT 1 FROM fault_runs WHERE queue = 'hangs'`)) === hung.length, 30_000);
  const results = await Promise.all(hung.map((id) => s.queue.cancel(id)));
  await waitFor('cancelled handlers told', async () => (await countWhere(s.db, `SELECT 1 FROM fault_runs WHERE queue = 'hangs' AND finished_at IS NOT NULL`)) === hung.length, 30_000);
  const after = await s.queue.enqueueMany(Array.from({ length: size.cancelled * 2 }, () => ({ queue: 'hangs', payload: { hang: false }, maxAttempts: 1 })));
  await waitFor('the hangs queue works on', async () => (await countWhere(s.db, `SELECT 1 FROM background_jobs WHERE id = ANY($1) AND status = 'completed'`, [after])) === after.length, 30_000);

  const { rows } = await s.db.query<{ kind: string; status: string; attempts: number; runs: number; last_error: string | null }>(
    `SELECT j.payload->>'kind' AS kind, j.status::text, j.attempts, j.last_error,
            (SELECT count(*)::int FROM fault_runs r WHERE r.job_id = j.id) AS runs
     FROM background_jobs j WHERE j.queue_name = 'faults' ORDER BY j.id`,
  );
  const outcomes: Record<string, KindOutcome> = {};
  for (const r of rows) {
    const o = (outcomes[r.kind] ??= { kind: r.kind, jobs: 0, ends: {}, runsPerJob: [], lastErrors: [] });
    o.jobs += 1;
    o.ends[`${r.status}/${r.attempts}`] = (o.ends[`${r.status}/${r.attempts}`] ?? 0) + 1;
    if (!o.runsPerJob.includes(r.runs)) o.runsPerJob.push(r.runs);
    const error = r.last_error?.split('\n')[0] ?? '(none)';
    if (!o.lastErrors.includes(error)) o.lastErrors.push(error);
  }
  const { rows: [latency] } = await s.db.query<{ p50: number; max: number }>(
    `SELECT (percentile_cont(0.5) WITHIN GROUP (ORDER BY ms))::float8 AS p50, max(ms)::float8 AS max FROM (
       SELECT extract(epoch FROM j.finished_at - r.started_at) * 1000 AS ms
       FROM background_jobs j JOIN fault_runs r ON r.job_id = j.id
       WHERE j.queue_name = 'faults' AND j.payload->>'kind' = 'ok') AS t`,
  );
  const { rows: hungRows } = await s.db.query<{ status: string; result: string }>(
    `SELECT j.status::text, r.result FROM background_jobs j JOIN fault_runs r ON r.job_id = j.id WHERE j.id = ANY($1)`,
    [hung],
  );
  const tally = (values: string[]) => values.reduce<Record<string, number>>((t, v) => ({ ...t, [v]: (t[v] ?? 0) + 1 }), {});
  return {
    kinds: outcomes,
    goodMs: latency,
    goodRanTwice: rows.filter((r) => r.kind === 'ok' && r.runs > 1).length,
    cancel: {
      results: [...new Set(results)],
      ends: tally(hungRows.map((r) => r.status)),
      runResults: [...new Set(hungRows.map((r) => r.result))],
      afterwards: await statusCounts(s.db, 'hangs'),
    },
    states: await statusCounts(s.db, 'faults'),
    crashes: await crashes(),
    jobs: kinds.length + hung.length + after.length,
    seconds: (performance.now() - t0) / 1_000,
  };
}
