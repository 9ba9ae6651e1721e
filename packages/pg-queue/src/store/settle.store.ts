// Settle: JobStore's fenced statements that end or renew a claim (complete, fail, snooze, heartbeat, start mark, put back).
import type { EntityManager } from 'typeorm';
import type { JobStatus } from '../interfaces/job.interface.js';
import type { JobStatements } from './job-statements.js';
import { SQL } from './job.sql.js';
import type { CompletedAttempt, FailedAttempt, JobRef, LogEntry, ReleasedJob, SettledBatch, SnoozedAttempt } from './job-store.types.js';
import { managerQuery } from './manager-query.js';

/** completeJobs, with the ids of the flow jobs the batch completed (the workers' path: see SettledBatch). */
export async function settleCompletions(db: JobStatements, workerId: string, jobs: CompletedAttempt[], deleteRows = false): Promise<SettledBatch<Set<string>>> {
  const { statement, values } = completionStatement(workerId, jobs, deleteRows);
  return refusedCompletions(await db.run<{ id: string; flow: boolean }>(statement, values));
}

/**
 * settleCompletions for one job, in the caller's transaction (a transactional handler's): the completion commits
 * or rolls back with the handler's own writes, fenced as every completion is.
 */
export async function settleCompletionInTransaction(manager: EntityManager, workerId: string, job: CompletedAttempt, deleteRows = false): Promise<SettledBatch<Set<string>>> {
  const { statement, values } = completionStatement(workerId, [job], deleteRows);
  return refusedCompletions(await managerQuery<{ id: string; flow: boolean }>(manager, SQL[statement], values));
}

/** failJobs, with the ids of the flow jobs the batch failed for good (the workers' path: see SettledBatch). */
export async function settleFailures(db: JobStatements, workerId: string, jobs: FailedAttempt[]): Promise<SettledBatch<Map<string, JobStatus>>> {
  const byId: Record<string, object> = {};
  let extras = false;
  let logged = false;
  for (const j of jobs) {
    const entry: { token: string; error: string; delayMs: number; final?: true; progress?: unknown; logs?: LogEntry } = { token: j.token, error: j.error, delayMs: j.retryDelayMs };
    if (j.final) entry.final = true;
    if (j.progressJson !== undefined) entry.progress = JSON.parse(j.progressJson);
    extras ||= j.final === true || j.progressJson !== undefined;
    // Lines the handler logged (job.log()): the variant that appends them; a batch without any keeps its statement.
    if (j.logEntry !== undefined) [entry.logs, logged] = [j.logEntry, true];
    byId[j.id] = entry;
  }
  const statement = logged ? 'failJobsWithLogs' : extras ? 'failJobsWithExtras' : 'failJobs';
  const rows = await db.run<{ id: string; status: JobStatus; flow: boolean }>(statement, [workerId, jobs.map((j) => j.id), JSON.stringify(byId)]);
  const statuses = new Map<string, JobStatus>();
  let flowJobs: string[] | undefined;
  for (const r of rows) {
    statuses.set(r.id, r.status);
    // A flow job failed for good may fail its flow or let 'continue' dependents run: look again after commit.
    if (r.flow && r.status === 'failed') (flowJobs ??= []).push(r.id);
  }
  return { answer: statuses, flowJobs };
}

/** Returns the ids put back (snoozed); any other id is no longer this worker's. */
export async function snoozeJobs(db: JobStatements, workerId: string, jobs: SnoozedAttempt[]): Promise<Set<string>> {
  const byId: Record<string, { token: string; delayMs: number; note?: string; logs?: LogEntry }> = {};
  let logged = false;
  for (const j of jobs) {
    const entry: { token: string; delayMs: number; note?: string; logs?: LogEntry } = j.note === undefined ? { token: j.token, delayMs: j.delayMs } : { token: j.token, delayMs: j.delayMs, note: j.note };
    if (j.logEntry !== undefined) [entry.logs, logged] = [j.logEntry, true];
    byId[j.id] = entry;
  }
  const rows = await db.run<{ id: string }>(logged ? 'snoozeJobsWithLogs' : 'snoozeJobs', [workerId, jobs.map((j) => j.id), JSON.stringify(byId)]);
  return new Set(rows.map((r) => r.id));
}

/**
 * The heartbeat (see heartbeat in settle.sql.ts): renews the leases of `started` jobs (marking those started from
 * the buffer), and checks `buffered` ones (giving back those of paused queues). Returns the ids still this
 * worker's; any other id is no longer its. `progress` ([id, JSON text] of the jobs whose progress changed since
 * the last beat) rides the same statement.
 */
export async function extendLeases(
  db: JobStatements,
  workerId: string,
  leaseMs: number,
  started: JobRef[],
  progress: [string, string][] = [],
  buffered: JobRef[] = [],
  logs: [string, LogEntry][] = [],
): Promise<Set<string>> {
  const values: unknown[] = [workerId, leaseMs, started.map((j) => j.id), tokensById(started), null, buffered.map((j) => j.id), tokensById(buffered)];
  if (progress.length > 0) values[4] = `{${progress.map(([id, json]) => `"${id}":${json}`).join(',')}}`;
  // Lines handlers logged since the last beat (job.log()): only then the variant that appends them ($8).
  if (logs.length > 0) values.push(JSON.stringify(Object.fromEntries(logs)));
  const rows = await db.run<{ id: string }>(logs.length > 0 ? 'heartbeatWithLogs' : progress.length > 0 ? 'heartbeatWithProgress' : 'heartbeat', values);
  return new Set(rows.map((r) => r.id));
}

/**
 * The start mark (markStarted in settle.sql.ts): jobs claimed `buffered` (read ahead, or an eager start's insert) about
 * to start are charged, marked started and given the full lease, before their handlers are called. Returns the ids
 * marked; a job not in it is no longer this claim's and must not start.
 */
export async function markStarted(db: JobStatements, workerId: string, leaseMs: number, jobs: JobRef[]): Promise<Set<string>> {
  const rows = await db.run<{ id: string }>('markStarted', [workerId, leaseMs, jobs.map((j) => j.id), tokensById(jobs)]);
  return new Set(rows.map((r) => r.id));
}

export async function releaseJobs(db: JobStatements, workerId: string, jobs: ReleasedJob[]): Promise<number> {
  const values: unknown[] = [workerId, jobs.map((j) => j.id), tokensById(jobs)];
  // Running jobs put back at shutdown whose handlers logged (job.log()): their lines go with the put-back ($4).
  let logs: Record<string, LogEntry> | undefined;
  for (const j of jobs) if (j.logEntry !== undefined) (logs ??= {})[j.id] = j.logEntry;
  if (logs !== undefined) values.push(JSON.stringify(logs));
  const rows = await db.run<{ released: number }>(logs === undefined ? 'releaseJobs' : 'releaseJobsWithLogs', values);
  return rows[0]?.released ?? 0;
}

/**
 * $3 and $4 of a batch settle (BATCH_FENCE in settle.sql.ts): the one token every job of the batch carries, the common
 * case (all on their first claim), as $4; else {"id": token} as $3, looked up per row.
 */
function batchFence(jobs: JobRef[]): [tokens: string | null, token: string | null] {
  const token = jobs.length > 0 ? jobs[0].token : null;
  for (let i = 1; i < jobs.length; i++) if (jobs[i].token !== token) return [tokensById(jobs), null];
  return [null, token];
}

/** {"id": token} as JSON, for the fenced statements' per-row token lookup. */
function tokensById(jobs: JobRef[]): string {
  // Written as text: both are int8 values as the database printed them (digits, a minus at most), so neither needs
  // escaping. Through an object and JSON.stringify, numeric keys made V8 keep the object as a sparse dictionary:
  // 0.3 µs a job against 0.08 µs here, on every completion.
  let text = '{';
  for (let i = 0; i < jobs.length; i++) text += `${i === 0 ? '"' : ',"'}${jobs[i].id}":"${jobs[i].token}"`;
  return `${text}}`;
}

type CompletionStatement = 'completeJobs' | 'completeJobsWithResults' | 'completeJobsKeyless' | 'completeJobsWithResultsKeyless' | 'completeJobsWithLogs' | 'deleteCompletedJobs' | 'deleteCompletedJobsWithResults';

/** The completion statement for a batch (see completion() in settle.sql.ts) and its values. */
function completionStatement(
  workerId: string,
  jobs: CompletedAttempt[],
  deleteRows: boolean,
): { statement: CompletionStatement; values: unknown[] } {
  const values: unknown[] = [workerId, jobs.map((j) => j.id), ...batchFence(jobs)];
  const extras = resultsById(jobs);
  // completedRetentionMs 0: a plain job's row goes, with its result and lines; a flow job's row stays and gets them.
  if (deleteRows) return extras === undefined ? { statement: 'deleteCompletedJobs', values } : { statement: 'deleteCompletedJobsWithResults', values: [...values, extras.text] };
  const keyless = jobs.every((j) => j.keyless === true);
  if (extras === undefined) return { statement: keyless ? 'completeJobsKeyless' : 'completeJobs', values };
  values.push(extras.text);
  return { statement: extras.logged ? 'completeJobsWithLogs' : keyless ? 'completeJobsWithResultsKeyless' : 'completeJobsWithResults', values };
}

/** A completion's answer: the ids it refused (fenced out), and those of flow jobs it completed. */
function refusedCompletions(rows: { id: string; flow: boolean }[]): SettledBatch<Set<string>> {
  const refused = new Set<string>();
  let flowJobs: string[] | undefined;
  for (const r of rows) {
    if (r.flow) (flowJobs ??= []).push(r.id);
    else refused.add(r.id);
  }
  return { answer: refused, flowJobs };
}

/**
 * The completion variants' $5, {"id": {"r": result, "p": progress, "l": lines}}, built from JSON texts already checked
 * (no parse and stringify again); undefined when no job of the batch has any. `logged`: some job has lines to write
 * (job.log()), which only completeJobsWithLogs writes.
 */
function resultsById(jobs: CompletedAttempt[]): { text: string; logged: boolean } | undefined {
  let text: string | undefined;
  let logged = false;
  for (const j of jobs) {
    const logs = j.logEntry;
    if (j.resultJson === undefined && j.progressJson === undefined && logs === undefined) continue;
    const fields = [
      j.resultJson !== undefined ? `"r":${j.resultJson}` : '',
      j.progressJson !== undefined ? `"p":${j.progressJson}` : '',
      logs !== undefined ? `"l":${JSON.stringify(logs)}` : '',
    ].filter(Boolean).join(',');
    logged ||= logs !== undefined;
    text = `${text === undefined ? '{' : `${text},`}"${j.id}":{${fields}}`;
  }
  return text === undefined ? undefined : { text: `${text}}`, logged };
}
