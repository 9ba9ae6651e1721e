// The simulation's invariants (issue 40), each a function over the tables (background_jobs, the flows, the
// trigger-kept sim_transitions, the fault suite's fault_held) and the handlers' run log (sim_runs), returning its
// violations with the job ids they concern. Nothing here trusts the plan: only what was recorded.
import type pg from 'pg';

export interface Violation {
  invariant: string;
  jobIds: string[];
  detail: string;
}

export interface Run {
  id: string;
  job_id: string;
  attempt: number;
  worker: string;
  seq: number;
  queue: string;
  payload_hash: string;
  behaviour: string;
  flow_id: string | null;
  compensates: string | null;
  concurrency_key: string | null;
  started_at: Date;
  ended_at: Date | null;
  outcome: string | null;
}

export interface Transition {
  id: string;
  job_id: string;
  op: string;
  old_status: string | null;
  new_status: string | null;
  old_attempts: number | null;
  new_attempts: number | null;
  old_buffered: boolean | null;
  old_hash: string | null;
  new_hash: string | null;
  new_locked_by: string | null;
  priority: number;
  /** The row's error after a change of status or error (first line, clipped). */
  new_error: string | null;
  /** The job's flow, and the step a compensation undoes, as the row held them at the change. */
  flow_id: string | null;
  compensates: string | null;
  txid: string;
  at: Date;
}

/** What every invariant reads, loaded once. */
export interface Facts {
  runs: Run[];
  runsByJob: Map<string, Run[]>;
  transitionsByJob: Map<string, Transition[]>;
  transitions: Transition[];
  /** `${job}/${attempt}/${worker}` of every run held and started by a process when a fault hit it (or a stall, or a close). */
  held: Set<string>;
  /** Operator actions (sim_ops), with their times. */
  ops: { op: string; job_ids: string[]; detail: { slot?: string } | null; t0: Date; t1: Date | null }[];
  /** The lease of each worker id's slot. */
  leaseOf: (worker: string) => number;
}

export async function loadFacts(db: pg.Pool, leaseOf: (worker: string) => number): Promise<Facts> {
  const { rows: runs } = await db.query<Run>(`SELECT id::text, job_id::text, attempt, worker, seq, queue, payload_hash, behaviour, flow_id::text, compensates::text, concurrency_key, started_at, ended_at, outcome FROM sim_runs ORDER BY started_at, sim_runs.id`);
  const { rows: transitions } = await db.query<Transition>(
    `SELECT id::text, job_id::text, op, old_status, new_status, old_attempts, new_attempts, old_buffered, old_hash, new_hash, new_locked_by, priority, new_error, flow_id::text, compensates::text, txid::text, at FROM sim_transitions ORDER BY sim_transitions.id`,
  );
  const { rows: held } = await db.query<{ key: string }>(`SELECT job_id || '/' || attempt || '/' || worker AS key FROM fault_held`);
  const { rows: ops } = await db.query<Facts['ops'][number]>(`SELECT op, job_ids::text[] AS job_ids, detail, t0, t1 FROM sim_ops ORDER BY sim_ops.id`);
  const group = <T extends { job_id: string }>(items: T[]) => {
    const map = new Map<string, T[]>();
    for (const item of items) map.set(item.job_id, [...(map.get(item.job_id) ?? []), item]);
    return map;
  };
  return { runs, ops, runsByJob: group(runs), transitions, transitionsByJob: group(transitions), held: new Set(held.map((h) => h.key)), leaseOf };
}

const heldKey = (r: Run) => `${r.job_id}/${r.attempt}/${r.worker}`;
// A handler's own PgQueueError fails its attempt like any throw: spawn() refuses a child whose unique key a live job
// holds at the call (issue 39 item 11), and the attempt is retried as any failure is (docs/guides/flows.md).
const failedOutcome = (r: Run) =>
  r.outcome !== null && (r.outcome.startsWith('threw') || r.outcome === 'slept' || r.outcome === 'abort:JobTimeoutError' || r.outcome === 'abort:PgQueueError');

/** Runs whose process had its event loop blocked long enough (a 'block' job) to miss a heartbeat while they ran. */
function blockedBy(facts: Facts, run: Run): boolean {
  const end = run.ended_at?.getTime() ?? Infinity;
  return facts.runs.some(
    (b) => b.worker === run.worker && b.behaviour === 'block' && b.started_at.getTime() <= end && (b.ended_at?.getTime() ?? Infinity) >= run.started_at.getTime(),
  );
}

/** A transition by which the worker failed a running attempt on its timeout (JobTimeoutError's message). */
const timedOut = (t: Transition) =>
  t.op === 'update' && t.old_status === 'processing' && (t.new_status === 'queued' || t.new_status === 'failed') && /job timed out after \d+ ms/.test(t.new_error ?? '');

/** A transition that put a finished job back (an operator's retry). */
const requeued = (t: Transition) => t.op === 'update' && ['failed', 'cancelled', 'completed'].includes(t.old_status ?? '') && ['queued', 'blocked'].includes(t.new_status ?? '');

/** When the job's current life began as of `t`: its insert, or the last operator retry (which resets attempts) before `t`. */
function epochOf(facts: Facts, t: Transition): Date {
  let epoch = new Date(0);
  for (const x of facts.transitionsByJob.get(t.job_id) ?? []) if (x !== t && x.at <= t.at && (x.op === 'insert' || requeued(x)) && x.at > epoch) epoch = x.at;
  return epoch;
}

/** A run that ended uncharged before `at` (a durable sleep) or whose end was written before it: not running then. */
const sleptBefore = (r: Run, at: Date) => r.outcome === 'slept' && r.ended_at !== null && r.ended_at < at;

/**
 * A run its holder put back uncounted before `at`, and that ended before it: shutdown past its grace aborts a handler and
 * releases its row, taking back the interrupted attempt (`processing` -> `queued`, attempts one less, by the run's
 * worker), so the row's count no longer covers the run; the run is over for a change after its end (seed 1402, job 506:
 * closed at 38.6 s, released at 39.640, its handler returned at 39.677, replaced at 43.2).
 */
const releasedBefore = (facts: Facts, r: Run, at: Date) =>
  r.ended_at !== null && r.ended_at < at &&
  (facts.transitionsByJob.get(r.job_id) ?? []).some(
    (x) => x.at <= at && x.at >= r.started_at && x.op === 'update' && x.old_status === 'processing' && !x.old_buffered && x.new_status === 'queued' &&
      x.new_locked_by === r.worker && x.new_attempts === r.attempt - 1,
  );

/**
 * A job runs more than once only when a run was cut by a fault of its holder (fault_held), failed (a retry), was
 * retried by the operator after it, or shared its process with an event-loop block. Two runs of one job at once
 * on two processes without such a cause are reported separately (a lease lost while its holder ran it).
 */
export function runsExplained(facts: Facts): Violation[] {
  const out: Violation[] = [];
  for (const [jobId, runs] of facts.runsByJob) {
    if (runs.length < 2) continue;
    const transitions = facts.transitionsByJob.get(jobId) ?? [];
    for (let i = 0; i < runs.length - 1; i++) {
      const r = runs[i];
      // A hung or slow handler that ignores its signal runs on after its timeout failed the attempt: the retry is due.
      if (failedOutcome(r) || r.behaviour === 'hang' || r.behaviour === 'timeout' || facts.held.has(heldKey(r)) || blockedBy(facts, r)) continue;
      const next = runs[i + 1];
      // The later run is the start a SIGSTOP cut in two (decided before the freeze, begun on SIGCONT): the fleet records it as held.
      if (facts.held.has(heldKey(next))) continue;
      if (transitions.some((t) => requeued(t) && t.at >= r.started_at && t.at <= next.started_at)) continue;
      // Its worker failed the attempt by its timeout (the handler may still hang, e.g. in a wait on the app's full
      // pool): the retry is due, and the overlap is the hung call's, not a lost lease's.
      if (transitions.some((t) => timedOut(t) && t.at >= r.started_at && t.at <= next.started_at)) continue;
      const overlap = r.ended_at === null || r.ended_at > next.started_at;
      // The app's own lock waits filled the queue pool of the run's process meanwhile (issue 39, item 5)?
      const slot = r.worker.split('.')[0];
      const lockWait = facts.ops.some((o) => o.op === 'lock-wait' && o.detail?.slot === slot && o.t0 <= next.started_at && (o.t1 === null || o.t1 >= r.started_at));
      out.push({
        invariant: `${overlap ? 'runs.two-at-once' : 'runs.redone-without-cause'}${lockWait ? '.during-a-lock-wait' : r.behaviour === 'spawn' ? '.spawn' : ''}`,
        jobIds: [jobId],
        detail: `${overlap ? 'ran on two processes at once' : 'ran again'}${r.behaviour === 'spawn' ? ' (its handler spawned a child with a unique key)' : ''}: attempt ${r.attempt} on ${r.worker} (${r.outcome ?? 'no end'}) then attempt ${next.attempt} on ${next.worker}; no fault held it, it did not fail, nobody retried it`,
      });
      break;
    }
  }
  return out;
}

/** Never runs after a cancel accepted before it started; a bulk cancel of queued jobs takes none whose handler began. */
export function cancelTakesNoStarted(facts: Facts): Violation[] {
  const out: Violation[] = [];
  for (const t of facts.transitions) {
    if (t.op !== 'update' || t.new_status !== 'cancelled' || t.old_status === 'cancelled') continue;
    const later = (facts.transitionsByJob.get(t.job_id) ?? []).find((x) => x.at > t.at && requeued(x));
    // A run cut by a fault of its holder (the holder died or froze before the cancel) is not one the cancel could ask about.
    const epoch = epochOf(facts, t);
    const runs = (facts.runsByJob.get(t.job_id) ?? []).filter(
      (r) => r.started_at >= epoch && r.attempt > (t.old_attempts ?? 0) && (!later || r.started_at < later.at) && !facts.held.has(heldKey(r)) && !sleptBefore(r, t.at),
    );
    for (const r of runs) {
      const by = cancelCause(facts, t);
      out.push({
        invariant: `${r.started_at < t.at ? 'cancel.took-a-started-job' : 'cancel.ran-after-cancel'}.${by}`,
        jobIds: [t.job_id],
        detail: `cancelled (${by}) at ${t.at.toISOString()} from ${t.old_status}${t.old_buffered ? ' (buffered)' : ''} at ${t.old_attempts} attempts; attempt ${r.attempt} began on ${r.worker} at ${r.started_at.toISOString()} (run log; the handler was called a little earlier) and ended ${r.outcome ?? 'never'}`,
      });
    }
  }
  return out;
}

/** Who cancelled: a bulk cancel of queued jobs (the CLI), a single cancel(), or the job's flow (a step failed). */
function cancelCause(facts: Facts, t: Transition): string {
  if (facts.ops.some((o) => o.op === 'bulk-cancel' && o.t0 <= t.at && (o.t1 === null || t.at <= o.t1))) return 'bulk';
  if (facts.ops.some((o) => o.op === 'cancel' && o.job_ids.includes(t.job_id))) return 'single';
  return 'flow';
}

/** A running job is never changed (replace); a job never runs with a payload it no longer had when it started. */
export function replaceSparesRunning(facts: Facts): Violation[] {
  const out: Violation[] = [];
  for (const t of facts.transitions) {
    if (t.op !== 'update' || t.old_hash === t.new_hash) continue;
    const epoch = epochOf(facts, t);
    const runs = (facts.runsByJob.get(t.job_id) ?? []).filter(
      (r) => r.started_at >= epoch && !sleptBefore(r, t.at) && !releasedBefore(facts, r, t.at) && r.attempt > (t.old_attempts ?? 0) - (t.old_status === 'processing' && !t.old_buffered ? 1 : 0),
    );
    const before = runs.filter((r) => r.started_at <= t.at && r.payload_hash === t.old_hash);
    if (before.length > 0 || (t.old_status === 'processing' && !t.old_buffered)) {
      out.push({
        invariant: 'replace.changed-a-running-job',
        jobIds: [t.job_id],
        detail: `payload replaced at ${t.at.toISOString()} (row ${t.old_status}${t.old_buffered ? ', buffered' : ''}, ${t.old_attempts} attempts) while ${before.map((r) => `attempt ${r.attempt} on ${r.worker} (began ${r.started_at.toISOString()}, ${r.outcome ?? 'no end'})`).join(', ') || 'its row said it ran'}`,
      });
    }
    const stale = runs.filter((r) => r.started_at > t.at && r.payload_hash === t.old_hash && !facts.held.has(heldKey(r)));
    for (const r of stale) {
      out.push({ invariant: 'replace.ran-with-an-old-payload', jobIds: [t.job_id], detail: `attempt ${r.attempt} on ${r.worker} began at ${r.started_at.toISOString()} with the payload replaced at ${t.at.toISOString()}` });
    }
  }
  return out;
}

/**
 * Attempts are never charged for a run that did not begin; a job is never dead-lettered without a run. Except where a
 * fault of the charging worker, or a machine stall, came between the charge (a claim into a free slot, a job held
 * started ahead, a start mark) and the start: at-least-once allows that, and nothing can tell it from a crash after
 * the start.
 */
export async function attemptsCharged(db: pg.Pool, facts: Facts): Promise<Violation[]> {
  const { rows } = await db.query<{ id: string; status: string; attempts: number; last_error: string | null }>(
    `SELECT id::text, status::text, attempts, last_error FROM background_jobs_all WHERE flow_id IS NULL AND status IN ('completed', 'failed') AND attempts > 0`,
  );
  const { rows: heldRows } = await db.query<{ job_id: string; attempt: number }>(`SELECT job_id::text, attempt FROM fault_held`);
  const heldAttempts = new Map<string, Set<number>>();
  for (const h of heldRows) heldAttempts.set(h.job_id, (heldAttempts.get(h.job_id) ?? new Set()).add(h.attempt));
  // A claim that charges its attempt (no read-ahead) and whose process a fault hit before the handler began: the
  // attempt is charged as the claim's, which at-least-once allows.
  // A machine stall (the stall watch's STALL rows, recorded at its end; it names only the workers that held started
  // jobs) hits every process: one that ends after the charge and before the job's last change stopped the charging
  // worker from starting it within its lease, as a fault of its own would have (it is a fault, never a failure).
  const { rows: faults } = await db.query<{ worker: string; signal: string; at: Date }>(`SELECT worker, signal, at FROM fault_faults`);
  const faultAfterCharge = (jobId: string, attempts: number) => {
    const history = facts.transitionsByJob.get(jobId) ?? [];
    const charge = history.find((t) => t.new_attempts === attempts && (t.old_attempts ?? 0) < attempts);
    if (charge === undefined) return false;
    const lastChange = history[history.length - 1].at;
    return faults.some((f) => (f.worker === charge.new_locked_by && f.at >= charge.at) || (f.signal === 'STALL' && f.at >= charge.at && f.at <= lastChange));
  };
  const out: Violation[] = [];
  for (const j of rows) {
    const seen = new Set([...(facts.runsByJob.get(j.id) ?? []).map((r) => r.attempt), ...(heldAttempts.get(j.id) ?? [])]);
    if (j.status === 'failed' && seen.size === 0 && !faultAfterCharge(j.id, j.attempts)) {
      out.push({ invariant: 'attempts.dead-lettered-without-a-run', jobIds: [j.id], detail: `failed at ${j.attempts} attempts, no run recorded: ${j.last_error ?? ''}`.slice(0, 300) });
    } else if (j.attempts > Math.max(0, ...seen) && !faultAfterCharge(j.id, j.attempts)) {
      out.push({ invariant: 'attempts.charged-without-a-run', jobIds: [j.id], detail: `${j.status} at ${j.attempts} attempts; runs recorded for attempts ${[...seen].sort().join(', ') || 'none'}: ${j.last_error ?? ''}`.slice(0, 300) });
    }
  }
  return out;
}

/**
 * Jobs of one claim (one transaction, one worker) start in the claim's order: priority first. In queue `prio` across
 * the claim; in the keyed and fair queues within each key (their claims take each key's highest priority first, and
 * priority does not reorder keys).
 */
export function priorityWithinClaims(facts: Facts): Violation[] {
  const claims = new Map<string, { t: Transition; run: Run }[]>();
  for (const run of facts.runs) {
    const perKey = run.queue === 'keyed' || run.queue === 'fair';
    if (run.queue !== 'prio' && !(perKey && run.concurrency_key !== null)) continue;
    // The claim this run started from: the last claim of the job by this worker before the run began.
    const claim = (facts.transitionsByJob.get(run.job_id) ?? [])
      .filter((t) => t.op === 'update' && t.old_status === 'queued' && t.new_status === 'processing' && t.new_locked_by === run.worker && t.at <= run.started_at)
      .pop();
    if (!claim || (claim.new_attempts ?? 0) + 1 !== run.attempt) continue;
    const key = `${claim.txid}/${run.worker}${perKey ? ` key ${run.concurrency_key}` : ''}`;
    claims.set(key, [...(claims.get(key) ?? []), { t: claim, run }]);
  }
  const out: Violation[] = [];
  for (const [key, rows] of claims) {
    const started = rows.sort((a, b) => a.run.seq - b.run.seq);
    for (let i = 0; i < started.length; i++) {
      const later = started.slice(i + 1).find((x) => x.t.priority > started[i].t.priority);
      if (later) {
        out.push({
          invariant: 'order.priority-within-a-claim',
          jobIds: [started[i].t.job_id, later.t.job_id],
          detail: `claim ${key} (${rows.length} jobs started from it): job ${started[i].t.job_id} (priority ${started[i].t.priority}) started before job ${later.t.job_id} (priority ${later.t.priority})`,
        });
        break;
      }
    }
  }
  return out;
}

/**
 * Limits are never exceeded, from the run intervals: at no moment more runs of queue `lim` than its global
 * concurrency, nor more than one run of queue `keyed` per concurrency key. Runs a fault held are left out (a frozen
 * process's run goes on after its lease was given to another: the limit counts leases, not stale handlers).
 */
export function limitsHeld(facts: Facts, globalConcurrency: number | ((atMs: number) => number)): Violation[] {
  const out: Violation[] = [];
  const check = (name: string, runs: Run[], limit: number | ((atMs: number) => number)) => out.push(...overlapViolations(name, runs, limit));
  const live = (r: Run) => liveRun(facts, r);
  check('global-concurrency', facts.runs.filter((r) => r.queue === 'lim' && live(r)), globalConcurrency);
  const byKey = new Map<string, Run[]>();
  for (const r of facts.runs) if (r.queue === 'keyed' && r.concurrency_key && live(r)) byKey.set(r.concurrency_key, [...(byKey.get(r.concurrency_key) ?? []), r]);
  for (const [key, runs] of byKey) check(`per-key(${key})`, runs, 1);
  return out;
}

/** A run the limits count: it ended, and no fault held it (a frozen process's run goes on after its lease was given away). */
export function liveRun(facts: Facts, r: Run): boolean {
  return r.ended_at !== null && !facts.held.has(heldKey(r));
}

/**
 * The first moment more than the limit of `runs` overlap (one violation `limits.<name>`), from their intervals. The
 * limit is fixed, or the one in force at each instant (changed at runtime: invariants-runtime-limits.ts, globalLimitOf).
 */
export function overlapViolations(name: string, runs: Run[], fixedOrAt: number | ((atMs: number) => number)): Violation[] {
  const limitAt = typeof fixedOrAt === 'number' ? () => fixedOrAt : fixedOrAt;
  // A run that ended in the millisecond it started (a 429 thrown at once, seed 46) is left out: its end sorted before
  // its start and left it open for good. It held its slot for less than the clocks tell apart.
  const events = runs.filter((r) => r.ended_at === null || r.ended_at.getTime() > r.started_at.getTime()).flatMap((r) => [
    { at: r.started_at.getTime(), d: 1, r },
    { at: (r.ended_at ?? r.started_at).getTime(), d: -1, r },
  ]);
  // At one instant ends count before starts: a slot freed and taken again is not an overlap.
  events.sort((a, b) => a.at - b.at || a.d - b.d);
  const open = new Set<Run>();
  for (const e of events) {
    if (e.d < 0) open.delete(e.r);
    else open.add(e.r);
    if (e.d > 0 && open.size > limitAt(e.at)) {
      const now = [...open];
      return [{ invariant: `limits.${name}`, jobIds: now.map((r) => r.job_id), detail: `${now.length} runs at once (limit ${limitAt(e.at)}) at ${new Date(e.at).toISOString()}: ${now.map((r) => `${r.job_id}/${r.attempt} on ${r.worker}`).join(', ')}` }];
    }
  }
  return [];
}

/**
 * No job stays processing once the drain is over without a handler running it: a row still held then, unchanged
 * for 30 s, by a worker whose run of that attempt has ended (or never began), lost its outcome or its lease without
 * the row hearing of it (a heartbeat renewing a lease its worker no longer acts on, an outcome stuck on a connection
 * a network fault took). A drain that ran out of time leaves jobs legitimately running (seed 31: queue prio's
 * backlog of long jobs): those have an open run.
 */
export async function processingAfterDrain(db: pg.Pool): Promise<Violation[]> {
  const { rows } = await db.query<{ id: string; locked_by: string | null; attempts: number; lease: string | null; since: string }>(
    `SELECT j.id::text, j.locked_by, j.attempts, j.lease_expires_at::text AS lease, (SELECT max(t.at) FROM sim_transitions t WHERE t.job_id = j.id)::text AS since
     FROM background_jobs j
     WHERE j.status = 'processing'
       AND (SELECT max(t.at) FROM sim_transitions t WHERE t.job_id = j.id) < clock_timestamp() - interval '30 seconds'
       AND NOT EXISTS (SELECT 1 FROM sim_runs r WHERE r.job_id = j.id AND r.worker = j.locked_by AND r.attempt = j.attempts AND r.ended_at IS NULL)
     ORDER BY j.id`,
  );
  return rows.map((r) => ({ invariant: 'lost.processing-after-drain', jobIds: [r.id], detail: `still processing after the drain, unchanged since ${r.since}, no handler running it: held by ${r.locked_by ?? 'nobody'} at ${r.attempts} attempts, lease until ${r.lease ?? 'none'}` }));
}

/** A unique key is never held by two live jobs (sampled during the run and at the end). */
/** (A successor waiting for its key's holder, onConflict 'queue-after', is blocked with the key and of no flow: not a holder; invariants-lifo.ts.) */
export async function uniqueKeysHeldOnce(db: pg.Pool): Promise<Violation[]> {
  const { rows } = await db.query<{ key: string; ids: string[] }>(
    `SELECT queue_name || '/' || unique_key AS key, array_agg(id::text) AS ids FROM background_jobs
     WHERE unique_key IS NOT NULL AND (status IN ('queued', 'processing') OR (status = 'blocked' AND flow_id IS NOT NULL))
     GROUP BY queue_name, unique_key HAVING count(*) > 1`,
  );
  return rows.map((r) => ({ invariant: 'unique.two-live-holders', jobIds: r.ids, detail: `key ${r.key} held by ${r.ids.join(', ')}` }));
}

/** No flow step begins before its parents completed (or finished, for a 'continue' dependency). */
export async function flowOrder(db: pg.Pool, facts: Facts): Promise<Violation[]> {
  const { rows: deps } = await db.query<{ parent_id: string; child_id: string; on_failure: string }>(`SELECT parent_id::text, child_id::text, on_failure FROM background_job_deps`);
  const parentsOf = new Map<string, { parent_id: string; on_failure: string }[]>();
  for (const d of deps) parentsOf.set(d.child_id, [...(parentsOf.get(d.child_id) ?? []), d]);
  const out: Violation[] = [];
  for (const [jobId, runs] of facts.runsByJob) {
    const parents = parentsOf.get(jobId);
    if (!parents) continue;
    const first = runs[0];
    for (const p of parents) {
      const ok = p.on_failure === 'continue' ? ['completed', 'failed', 'cancelled'] : ['completed'];
      const done = (facts.transitionsByJob.get(p.parent_id) ?? []).find((t) => t.op === 'update' && ok.includes(t.new_status ?? ''));
      if (!done || done.at > first.started_at) {
        const retried = (facts.transitionsByJob.get(jobId) ?? []).some((t) => requeued(t) && t.at <= first.started_at);
        out.push({
          invariant: 'flow.step-before-its-parent',
          jobIds: [jobId, p.parent_id],
          detail: `job ${jobId} began at ${first.started_at.toISOString()} (attempt ${first.attempt} on ${first.worker}); its parent ${p.parent_id} (${p.on_failure}) ${done ? `${done.new_status} only at ${done.at.toISOString()}` : 'never completed'}${retried ? '; the job had been retried (failed or cancelled, then queued again) before it began' : ''}`,
        });
        break;
      }
    }
  }
  return out;
}

/**
 * A failed flow compensates every completed step exactly once, in reverse order (the undo of a child before the
 * undo of its parent); a step whose handler ran to the end is not cancelled uncompensated; a flow's final status
 * matches its jobs.
 *
 * Each flow is judged by its jobs as they were when it moved (sim_flow_transitions): the steps completed when it
 * began compensating are the ones to compensate, and its end matches its steps as they were at that end. An
 * operator's retry of a failed or cancelled step after that moment runs the step alone and leaves the flow as it
 * is (docs/guides/flows.md, Cancel, retry: "A flow already compensating or compensated stays as it is; the job runs
 * alone"), so a step that completed only after such a retry needs no compensation, and a flow whose failed step
 * was retried to completion after its end is still a flow that failed. A step retried with no such moment after it
 * is judged by its row, as before. And a step that failed or was cancelled fails its flow only when one of its
 * dependents does not continue past it, or it has none (docs/guides/flows.md, Fan-out and fan-in: "A job whose
 * failure every dependent continues past does not fail the flow"): a completed flow may hold such a step.
 */
export async function flowPromises(db: pg.Pool, facts: Facts): Promise<Violation[]> {
  const { rows: jobs } = await db.query<{ id: string; flow_id: string; status: string; has_undo: boolean; compensates: string | null; flow_status: string }>(
    `SELECT j.id::text, j.flow_id::text, j.status::text, j.compensate IS NOT NULL AS has_undo, j.compensates::text, f.status AS flow_status
     FROM background_jobs_all j JOIN background_flows f ON f.id = j.flow_id`,
  );
  const { rows: deps } = await db.query<{ parent_id: string; child_id: string; on_failure: string }>(`SELECT parent_id::text, child_id::text, on_failure FROM background_job_deps`);
  const { rows: flowMoves } = await db.query<{ flow_id: string; new_status: string; txid: string; at: Date }>(`SELECT flow_id::text, new_status, txid::text, at FROM sim_flow_transitions ORDER BY id`);
  type Move = { new_status: string; txid: string; at: Date };
  const movesOf = new Map<string, Move[]>();
  for (const m of flowMoves) movesOf.set(m.flow_id, [...(movesOf.get(m.flow_id) ?? []), m]);
  const FINAL = ['completed', 'failed', 'compensated', 'compensation_failed', 'cancelled'];
  const edgesFrom = new Map<string, string[]>();
  for (const d of deps) edgesFrom.set(d.parent_id, [...(edgesFrom.get(d.parent_id) ?? []), d.on_failure]);
  // A job's change made by the statement that moved the flow is part of that move, whatever its clock says: the
  // job's row trigger fires at the end of the job's statement, after the flow function it called moved the flow.
  const by = (t: Transition, move: Move) => t.at <= move.at || t.txid === move.txid;
  /** The job's status as of `move` when an operator's retry took it out of a final status after it; else its row's. */
  const asOf = (j: { id: string; status: string }, move: Move | undefined): string => {
    if (!move) return j.status;
    const history = facts.transitionsByJob.get(j.id) ?? [];
    if (!history.some((t) => requeued(t) && !by(t, move))) return j.status;
    return history.filter((t) => by(t, move)).pop()?.new_status ?? j.status;
  };
  const undoOf = new Map<string, string[]>();
  for (const j of jobs) if (j.compensates) undoOf.set(j.compensates, [...(undoOf.get(j.compensates) ?? []), j.id]);
  const deletedStepsOf = new Map<string, string[]>();
  for (const t of facts.transitions) {
    if (t.op === 'delete' && t.flow_id !== null && t.compensates === null) deletedStepsOf.set(t.flow_id, [...(deletedStepsOf.get(t.flow_id) ?? []), t.job_id]);
  }
  const out: Violation[] = [];
  const byFlow = new Map<string, typeof jobs>();
  for (const j of jobs) byFlow.set(j.flow_id, [...(byFlow.get(j.flow_id) ?? []), j]);
  for (const [flowId, members] of byFlow) {
    const status = members[0].flow_status;
    const moves = movesOf.get(flowId) ?? [];
    const compensatingAt = moves.find((m) => m.new_status === 'compensating');
    const endedAt = moves.filter((m) => FINAL.includes(m.new_status)).pop();
    const failingAt = moves.filter((m) => m.new_status === 'failing').pop();
    const steps = members.filter((j) => j.compensates === null);
    const compensating = status === 'compensated' || status === 'compensation_failed' || status === 'compensating';
    // A step an operator retried after the flow's move runs alone, and so do the children its spawn() adds to the
    // flow then (seed 10: step p9 failed, its dependents continued, the flow completed; p9 was retried, spawned
    // p9/child, and the operator cancelled that child): a job created after the move, in a flow one of whose jobs
    // was retried after it, is not one the move could count.
    const retriedAfter = (move: Move) => members.some((m) => (facts.transitionsByJob.get(m.id) ?? []).some((t) => requeued(t) && !by(t, move)));
    const judged = (j: (typeof members)[number], move: Move | undefined): string => {
      const insert = (facts.transitionsByJob.get(j.id) ?? []).find((t) => t.op === 'insert');
      return move && insert && !by(insert, move) && retriedAfter(move) ? 'created after it' : asOf(j, move);
    };
    for (const j of steps) {
      const undos = undoOf.get(j.id) ?? [];
      if (compensating && j.has_undo && judged(j, compensatingAt) === 'completed' && undos.length !== 1) {
        out.push({ invariant: 'flow.compensated-exactly-once', jobIds: [j.id], detail: `flow ${flowId} ${status}: step ${j.id}, completed when the flow began compensating${compensatingAt ? ` (${compensatingAt.at.toISOString()})` : ''}, has ${undos.length} compensations` });
      }
      // A run a fault held may have ended with its completion lost on the way (its lease lapsed first): the step
      // never completed for the queue, so it has nothing to compensate (seed 31, job 4756: a connection cut).
      const ranToEnd = (facts.runsByJob.get(j.id) ?? []).some((r) => r.outcome === 'ok' && !facts.held.has(heldKey(r)));
      // The operator's cancel(id) of the step while it ran (its holder's row said started): the docs' "counts as that
      // job failing", its outcome discarded even when the handler had just returned (seed 61, job 819: ended 35 ms
      // before the cancel, its completion on its way), and a failed step is not compensated.
      const cancelledRunning = (facts.transitionsByJob.get(j.id) ?? []).some(
        (t) => t.new_status === 'cancelled' && t.old_status === 'processing' && !t.old_buffered && facts.ops.some((o) => o.op === 'cancel' && o.job_ids.includes(j.id)),
      );
      if (j.has_undo && j.status === 'cancelled' && ranToEnd && !cancelledRunning && undos.length === 0 && status !== 'cancelled') {
        out.push({ invariant: 'flow.ran-but-cancelled-uncompensated', jobIds: [j.id], detail: `flow ${flowId} ${status}: step ${j.id}'s handler ran to the end, the step ended cancelled, no compensation` });
      }
    }
    if (status === 'completed') {
      // A step that did not complete is allowed only when every dependent continues past it (and it has one).
      const wrong = steps.filter((j) => {
        const edges = edgesFrom.get(j.id) ?? [];
        const then = judged(j, endedAt);
        return then !== 'completed' && then !== 'created after it' && !(edges.length > 0 && edges.every((e) => e === 'continue'));
      });
      if (wrong.length) {
        out.push({ invariant: 'flow.status-matches-jobs', jobIds: wrong.map((j) => j.id), detail: `flow ${flowId} completed with jobs ${wrong.map((j) => `${j.id} ${judged(j, endedAt)}`).join(', ')} that some dependent did not continue past (or that have none)` });
      }
    }
    // A job open at the end is wrong unless an operator retried it after the flow's end (it runs alone, above), or it
    // was created after the end by such a job: the drain does not wait for a retried job's backoff (its run_at is
    // ahead), so the simulation may end while it waits (seed 1401, job 3353: retried 59 s after its flow completed,
    // two timeouts, left queued with its third attempt 1 s ahead when the drain found nothing due).
    // judged() reads a job retried after the end as it was at the end: only one finished then (or created after it) is
    // reopened; one still open at the end and retried later stays counted.
    const reopened = (j: (typeof members)[number]) =>
      endedAt !== undefined && ['completed', 'failed', 'cancelled', 'created after it'].includes(judged(j, endedAt));
    const open = members.filter((j) => ['queued', 'processing', 'blocked'].includes(j.status) && !reopened(j));
    if (FINAL.includes(status) && open.length > 0) {
      out.push({ invariant: 'flow.status-matches-jobs', jobIds: open.map((j) => j.id), detail: `flow ${flowId} ${status} with jobs still ${open.map((j) => `${j.id} ${j.status}`).join(', ')}` });
    }
    // A flow that failed had a step failed or cancelled when it turned failing (its row's status then, or a
    // transition to failed or cancelled at or before that moment). Only the steps that existed then are judged: a
    // step retried after the flow ended runs alone and its spawn() adds children to the ended flow (seed 22: the
    // flow's own steps were pruned, the late child of a retried step was all that was left of it).
    // The steps the pruner deleted are judged too, by their history (sim_transitions keeps their flow): a step retried
    // after the flow's end keeps its own retention, so the flow's other jobs may go before it (seed 1869304768: the
    // step that failed the flow was pruned, the step retried with it was left).
    const deleted = (deletedStepsOf.get(flowId) ?? []).filter((id) => !members.some((m) => m.id === id)).map((id) => ({ id, status: 'deleted' }));
    const failedThen = (j: { id: string; status: string }) =>
      failingAt ? (facts.transitionsByJob.get(j.id) ?? []).some((t) => ['failed', 'cancelled'].includes(t.new_status ?? '') && by(t, failingAt)) : ['failed', 'cancelled'].includes(j.status);
    const existedThen = [...steps, ...deleted].filter((j) => {
      const insert = (facts.transitionsByJob.get(j.id) ?? []).find((t) => t.op === 'insert');
      return !failingAt || !insert || by(insert, failingAt);
    });
    if (['failed', 'compensated', 'compensation_failed'].includes(status) && existedThen.length > 0 && !existedThen.some(failedThen)) {
      out.push({ invariant: 'flow.status-matches-jobs', jobIds: existedThen.map((j) => j.id).slice(0, 10), detail: `flow ${flowId} ${status} but none of its steps had failed or been cancelled when it turned failing${failingAt ? ` (${failingAt.at.toISOString()}, transaction ${failingAt.txid})` : ''}` });
    }
  }
  // Reverse order: the undo of a parent does not begin before the undo of its child ended.
  const firstRun = (id: string) => facts.runsByJob.get(id)?.[0];
  for (const d of deps) {
    const up = (undoOf.get(d.parent_id) ?? []).map(firstRun).find(Boolean);
    const down = (undoOf.get(d.child_id) ?? []).map(firstRun).find(Boolean);
    if (up && down && up.started_at < down.started_at) {
      out.push({ invariant: 'flow.compensation-order', jobIds: [d.parent_id, d.child_id], detail: `the undo of ${d.parent_id} began before the undo of its child ${d.child_id}` });
    }
  }
  return out;
}

/**
 * `flow.pruned-while-live`: no job of a flow is deleted while another job of that flow can still run (queued,
 * processing or blocked): a job an operator retried after its flow ended reads its parents and is retried with its
 * dependents, so the pruner keeps the flow's jobs until it is final again (maintenance.sql.ts, flowAtRest). The other
 * job must have been live for a second before the delete: a retry committed while the pruner's statement ran is a
 * race the pruner cannot see (its snapshot is older).
 */
export function flowPrunedWhileLive(facts: Facts): Violation[] {
  const jobsOf = new Map<string, Set<string>>();
  for (const t of facts.transitions) if (t.flow_id !== null) jobsOf.set(t.flow_id, (jobsOf.get(t.flow_id) ?? new Set()).add(t.job_id));
  const LIVE = ['queued', 'processing', 'blocked'];
  const out: Violation[] = [];
  for (const d of facts.transitions) {
    if (d.op !== 'delete' || d.flow_id === null || d.old_status === 'processing') continue;
    const before = d.at.getTime() - 1_000;
    // A job's status at `at`: the end of the chain of changes its last transaction made before then. A change made
    // by a statement run inside another (a flow's cancel inside a worker's outcome) is recorded first, with the
    // earlier clock, though it came after (its trigger fires when its own statement ends): queued -> cancelled, then
    // processing -> queued, both of one transaction, end cancelled.
    const statusAt = (id: string, at: number) => {
      const before = (facts.transitionsByJob.get(id) ?? []).filter((t) => t.at.getTime() <= at && t.txid !== d.txid);
      const last = before[before.length - 1];
      if (last === undefined) return null;
      const group = before.filter((t) => t.txid === last.txid);
      if (group.some((t) => t.op === 'delete')) return null;
      const ends = group.filter((t) => !group.some((o) => o !== t && o.old_status === t.new_status && o.op === 'update'));
      return (ends[ends.length - 1] ?? last).new_status;
    };
    const goesWithIt = (id: string) => (facts.transitionsByJob.get(id) ?? []).some((t) => t.op === 'delete' && t.txid === d.txid);
    // Live at `before` and at every change up to the delete.
    const liveThrough = (id: string) =>
      LIVE.includes(statusAt(id, before) ?? '') &&
      (facts.transitionsByJob.get(id) ?? []).every((t) => t.at.getTime() <= before || t.at > d.at || t.txid === d.txid || (t.op !== 'delete' && LIVE.includes(t.new_status ?? '')));
    const live = [...(jobsOf.get(d.flow_id) ?? [])].filter((id) => id !== d.job_id && !goesWithIt(id) && liveThrough(id));
    if (live.length) {
      out.push({ invariant: 'flow.pruned-while-live', jobIds: [d.job_id, ...live.slice(0, 3)], detail: `job ${d.job_id} of flow ${d.flow_id} (${d.old_status}) deleted at ${d.at.toISOString()} while ${live.slice(0, 3).join(', ')} of its flow could still run` });
    }
  }
  return out.slice(0, 20);
}

/**
 * A recorded durable step's function is never called again by a later attempt (unless a fault cut the attempt that ran
 * it, or the attempt was aborted while the step ran: its timeout or a cancel, whose step result is refused, so the
 * step was never recorded; seed 43: a step still running when its 1.5 s timeout fired, run again after a retry).
 */
export async function stepsRunOnce(db: pg.Pool, facts: Facts): Promise<Violation[]> {
  const { rows } = await db.query<{ job_id: string; name: string; attempts: number[]; workers: string[] }>(
    `SELECT job_id::text, name, array_agg(attempt ORDER BY at) AS attempts, array_agg(worker ORDER BY at) AS workers FROM sim_steps GROUP BY 1, 2 HAVING count(*) > 1`,
  );
  const aborted = (job: string, attempt: number, worker: string) =>
    (facts.runsByJob.get(job) ?? []).some((r) => r.attempt === attempt && r.worker === worker && (r.outcome ?? '').startsWith('abort:'));
  const excused = (job: string, attempt: number, worker: string) => facts.held.has(`${job}/${attempt}/${worker}`) || aborted(job, attempt, worker);
  // A call again is one by a later attempt after an earlier call that was not cut (its run held at a fault, or
  // aborted). A call by an earlier attempt after a later one is that earlier attempt's run going on where a fault
  // left it (seed 192897398: frozen past its lease after its read of the recorded steps, the process woke, and the
  // handler ran the step on that read, while the next attempt had run and recorded it): excused when a fault held
  // that run, as a job's run is (runs.*); without one, two attempts ran at once, which runs.two-at-once reports.
  return rows
    .filter((r) =>
      r.attempts.some((a, i) => i > 0 && r.attempts.slice(0, i).some((b, j) => (a >= b ? !excused(r.job_id, b, r.workers[j]) : !excused(r.job_id, a, r.workers[i])))),
    )
    .map((r) => ({ invariant: 'steps.called-again', jobIds: [r.job_id], detail: `step ${r.name} ran in attempts ${r.attempts.join(', ')} (on ${r.workers.join(', ')})` }));
}

/** The host processes never crash: nothing reached uncaughtException/unhandledRejection, no process ended unasked. */
export async function noCrash(db: pg.Pool): Promise<Violation[]> {
  const { rows: crashes } = await db.query<{ worker: string; event: string; error: string }>(`SELECT worker, event, error FROM fault_crashes`);
  const { rows: exits } = await db.query<{ worker: string; how: string }>(`SELECT worker, how FROM sim_exits WHERE NOT meant`);
  return [
    ...crashes.map((c) => ({ invariant: 'process.crashed', jobIds: [], detail: `${c.worker}: ${c.event}: ${c.error.slice(0, 300)}` })),
    ...exits.map((e) => ({ invariant: 'process.exited-unasked', jobIds: [], detail: `${e.worker} ended (${e.how})` })),
  ];
}

/**
 * No job lost: every committed enqueue is stored (or was pruned after it finished), nothing rolled back is stored,
 * and every job is final or legitimately waiting (due later, blocked on an unfinished parent) when the drain ended
 * (`drainedAt`, the database clock: a job that became due after it had no worker left to run it).
 */
export async function noJobLost(db: pg.Pool, why: (id: string) => Promise<unknown>, drainedAt: string): Promise<Violation[]> {
  const out: Violation[] = [];
  const { rows: missing } = await db.query<{ id: string }>(
    `SELECT DISTINCT e.job_id::text AS id FROM sim_enqueues e WHERE e.committed AND NOT EXISTS (SELECT 1 FROM background_jobs j WHERE j.id = e.job_id)
       AND NOT EXISTS (SELECT 1 FROM sim_transitions t WHERE t.job_id = e.job_id AND t.op = 'delete' AND t.old_status IN ('completed', 'failed', 'cancelled'))`,
  );
  if (missing.length) out.push({ invariant: 'lost.committed-enqueue-missing', jobIds: missing.map((r) => r.id), detail: `${missing.length} committed jobs are not stored and were not pruned` });
  const { rows: ghosts } = await db.query<{ id: string }>(
    `SELECT e.job_id::text AS id FROM sim_enqueues e JOIN background_jobs j ON j.id = e.job_id WHERE NOT e.committed
       AND NOT EXISTS (SELECT 1 FROM sim_enqueues c WHERE c.job_id = e.job_id AND c.committed)`,
  );
  if (ghosts.length) out.push({ invariant: 'lost.rolled-back-enqueue-stored', jobIds: ghosts.map((r) => r.id), detail: `${ghosts.length} jobs of rolled-back enqueues are stored` });
  const { rows: stuck } = await db.query<{ id: string; status: string }>(
    `SELECT j.id::text, j.status::text FROM background_jobs j
     WHERE (j.status = 'queued' AND j.run_at <= $1::timestamptz - interval '1 second')
        OR (j.status = 'processing' AND j.lease_expires_at < $1::timestamptz - interval '1 second')
        OR (j.status = 'blocked' AND NOT EXISTS (
              SELECT 1 FROM background_job_deps d JOIN background_jobs p ON p.id = d.parent_id
              WHERE d.child_id = j.id AND NOT d.done AND p.status IN ('queued', 'processing', 'blocked')))
     ORDER BY j.id LIMIT 50`,
    [drainedAt],
  );
  for (const s of stuck) out.push({ invariant: 'lost.stuck', jobIds: [s.id], detail: `${s.status} after the drain: ${JSON.stringify(await why(s.id).catch((e: Error) => e.message))}`.slice(0, 400) });
  return out;
}

/** The history of jobs for a failure report: their row, their transitions and their runs. */
export async function historyOf(db: pg.Pool, ids: string[]): Promise<string> {
  const { rows: jobs } = await db.query(`SELECT id, queue_name, status, attempts, max_attempts, priority, run_at, locked_by, buffered, unique_key, flow_id, flow_ref, compensates, last_error, payload FROM background_jobs_all WHERE id = ANY($1::int8[])`, [ids]);
  const { rows: transitions } = await db.query(`SELECT job_id, op, old_status, new_status, old_attempts, new_attempts, old_buffered, new_buffered, old_locked_by, new_locked_by, left(old_hash, 6) AS old_hash, left(new_hash, 6) AS new_hash, new_error, txid, at FROM sim_transitions WHERE job_id = ANY($1::int8[]) ORDER BY id`, [ids]);
  const { rows: runs } = await db.query(`SELECT job_id, attempt, worker, seq, behaviour, left(payload_hash, 6) AS hash, row_status, row_buffered, started_at, ended_at, outcome FROM sim_runs WHERE job_id = ANY($1::int8[]) ORDER BY started_at`, [ids]);
  const { rows: held } = await db.query(`SELECT h.job_id, h.attempt, h.worker, f.signal, f.at FROM fault_held h LEFT JOIN fault_faults f ON f.worker = h.worker WHERE h.job_id = ANY($1::int8[])`, [ids]);
  const { rows: flows } = await db.query(
    `SELECT flow_id, old_status, new_status, txid, at FROM sim_flow_transitions WHERE flow_id IN (SELECT flow_id FROM background_jobs_all WHERE id = ANY($1::int8[]) UNION SELECT flow_id FROM sim_transitions WHERE job_id = ANY($1::int8[])) ORDER BY id`,
    [ids],
  );
  const line = (r: object) => `    ${JSON.stringify(r)}`;
  return [
    '  jobs:', ...jobs.map(line),
    ...(flows.length ? ['  their flows (sim_flow_transitions):', ...flows.map(line)] : []),
    '  history (sim_transitions):', ...transitions.map(line),
    '  run log (sim_runs):', ...runs.map(line),
    ...(held.length ? ['  held at faults:', ...held.map(line)] : []),
  ].join('\n');
}
