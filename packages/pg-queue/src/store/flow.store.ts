import type { Pool, QueryResultRow } from 'pg';
import { Statements } from './statements.js';
import type { EntityManager } from 'typeorm';
import { PgQueueError } from '../errors/pg-queue.error.js';
import type { CompensatedJob, FinishedFlow, FlowEdge, FlowJobRecord, FlowRecord, FlowStatus, FlowSummary, ParentJob } from '../flows/flow.interfaces.js';
import type { FlowEdgeRow, FlowPlan } from '../flows/plan-flow.js';
import type { JobStatus } from '../interfaces/job.interface.js';
import { FLOW_SQL } from './flow.sql.js';
import type { Wake } from './shared.sql.js';
import type { CompletedAttempt } from './job-store.types.js';
import { managerQuery } from './manager-query.js';
import type { CallerTransaction } from '../transactions/caller-transaction.js';

/** The sweeper's safety net works in batches of this many rows per statement. */
const STRANDED_BATCH = 1_000;

/**
 * Flows' table access, one method per statement of flow.sql.ts. Named (prepared) statements unless a transaction
 * pooler sits in between; an enqueueFlow in the caller's transaction goes through its EntityManager.
 */
export class FlowStore {
  private readonly statements: Statements<typeof FLOW_SQL>;

  constructor(
    pool: Pool,
    options: { transactionPooler?: boolean } = {},
  ) {
    this.statements = new Statements(pool, FLOW_SQL, 'pgq_flow_', options);
  }

  private run<R extends QueryResultRow>(name: keyof typeof FLOW_SQL, values: unknown[]): Promise<R[]> {
    return this.statements.rows<R>(name, values);
  }

  /**
   * Every job and edge of a flow in one statement. In the caller's transaction, inside a savepoint: a refused flow
   * (a unique key already held) leaves the caller's transaction usable, with nothing of the flow in it.
   */
  async insertFlow(name: string | null, plan: FlowPlan, tx?: CallerTransaction, trace?: string, wake: Wake = 'trigger'): Promise<{ flowId: string; ids: string[] }> {
    const values = [name, ...flowColumns(plan), edgesJson(plan.edges), trace ?? null];
    let rows: { flow_id: string; id: string }[];
    try {
      if (!tx) rows = await this.run(wake === 'deferred' ? 'insertFlowWakeDeferred' : 'insertFlow', values);
      else rows = await tx.atomically((inner) => inner.query(FLOW_SQL.insertFlow, values));
    } catch (error) {
      throw explainKeyConflict(error, plan);
    }
    return { flowId: rows[0].flow_id, ids: rows.map((r) => r.id) };
  }

  /**
   * Completes a job and adds its spawned children to its flow, in one statement: when the completion is fenced out
   * (the lease was lost), no child is created. `completed` false: fenced out. `duplicates`: the spawn refs of children
   * not created because another job took their unique key after job.spawn() checked it (a held key never refuses
   * the completion; their dependents in the spawn do not wait for them).
   */
  async completeSpawning(workerId: string, job: CompletedAttempt, plan: FlowPlan, manager?: EntityManager): Promise<{ completed: boolean; spawned: number; duplicates: string[] }> {
    const values = [workerId, job.id, job.token, job.resultJson ?? null, job.progressJson ?? null, ...flowColumns(plan), edgesJson(plan.edges)];
    // Lines the handler logged (job.log()) and no heartbeat wrote: the variant that appends them ($18).
    const logs = job.logEntry;
    if (logs !== undefined) values.push(JSON.stringify(logs));
    const statement = logs === undefined ? 'completeSpawning' : 'completeSpawningWithLogs';
    // With a manager: in a transactional handler's transaction (worker/transactional-attempt.ts).
    const [row] = manager
      ? await managerQuery<{ completed: boolean; spawned: number; duplicates: string[] }>(manager, FLOW_SQL[statement], values)
      : await this.run<{ completed: boolean; spawned: number; duplicates: string[] }>(statement, values);
    return { completed: row.completed, spawned: row.spawned, duplicates: row.duplicates ?? [] };
  }

  /** For job.spawn(): the jobs holding the unique keys of `keys` (by position; only those held), with the holder's id. */
  async spawnKeysHeld(keys: { queue: string; uniqueKey: string }[]): Promise<{ index: number; holder: string }[]> {
    if (keys.length === 0) return [];
    const rows = await this.run<{ ord: number; holder: string }>('spawnKeysHeld', [keys.map((k) => k.queue), keys.map((k) => k.uniqueKey)]);
    return rows.map((r) => ({ index: r.ord - 1, holder: r.holder }));
  }

  /** The flow a job belongs to (null: none, or no such job). */
  async jobFlow(jobId: string): Promise<{ flowId: string; ref: string | null } | null> {
    const [row] = await this.run<{ flow_id: string | null; flow_ref: string | null }>('jobFlow', [jobId]);
    return row?.flow_id ? { flowId: row.flow_id, ref: row.flow_ref } : null;
  }

  /** The second look after a settle of flow jobs committed (see FLOW_FUNCTIONS in flow-functions.sql.ts). */
  async recheckFlowJobs(jobIds: string[]): Promise<{ unblocked: number; settled: number }> {
    const [row] = await this.run<{ unblocked: number; settled: number }>('recheckFlowJobs', [jobIds]);
    return row;
  }

  /**
   * The sweeper's safety net: blocked jobs with no open edge are unblocked, jobs requeued in a failing flow are
   * cancelled, flows with no live job are settled; each in bounded batches until one comes back short.
   */
  async rescueStranded(): Promise<{ unblocked: number; cancelled: number; settled: number }> {
    const total = { unblocked: 0, cancelled: 0, settled: 0 };
    for (const [statement, key] of [['unblockStranded', 'unblocked'], ['cancelInFailingFlows', 'cancelled'], ['settleStranded', 'settled']] as const) {
      for (;;) {
        const [row] = await this.run<Record<typeof key, number>>(statement, [STRANDED_BATCH]);
        total[key] += row[key];
        if (row[key] < STRANDED_BATCH) break;
      }
    }
    return total;
  }

  /** The flows the jobs `jobIds` finished, not announced yet (marked announced now), with the id of the job that finished each. */
  async announceFlows(jobIds: string[]): Promise<{ jobId: string; flow: FinishedFlow }[]> {
    const rows = await this.run<FinishedFlow & { job_id: string }>('announceFlows', [jobIds]);
    return rows.map(({ job_id, ...flow }) => ({ jobId: job_id, flow }));
  }

  async getFlow(id: string): Promise<FlowRecord | null> {
    const [row] = await this.run<FlowRow>('getFlow', [id]);
    if (!row) return null;
    const refOf = new Map(row.jobs.map((j) => [j.id, j.ref]));
    const waiting = new Map<string, string[]>();
    for (const e of row.edges) if (!e.done) waiting.set(e.child, [...(waiting.get(e.child) ?? []), refOf.get(e.parent) ?? e.parent]);
    const jobs = row.jobs.map(
      (j): FlowJobRecord => ({
        id: j.id,
        ref: j.ref,
        queue: j.queue,
        status: j.status === 'processing' && j.buffered ? 'queued' : j.status,
        attempts: j.attempts,
        maxAttempts: j.maxAttempts,
        lastError: j.lastError,
        result: j.result ?? null,
        compensates: j.compensates,
        lockedBy: j.lockedBy,
        runAt: new Date(j.runAt),
        finishedAt: j.finishedAt ? new Date(j.finishedAt) : null,
        waitingFor: j.status === 'blocked' ? (waiting.get(j.id) ?? []) : [],
      }),
    );
    return {
      id: row.id,
      name: row.name,
      status: row.status,
      reason: row.reason,
      failedJobId: row.failed_job_id,
      createdAt: row.created_at,
      updatedAt: row.updated_at,
      finishedAt: row.finished_at,
      jobs,
      edges: row.edges,
    };
  }

  async flowStatus(id: string): Promise<{ status: FlowStatus; reason: string | null } | null> {
    const [row] = await this.run<{ status: FlowStatus; reason: string | null }>('flowStatus', [id]);
    return row ?? null;
  }

  /** null: no such flow, or it had finished already. */
  async cancelFlow(id: string): Promise<{ cancelled: number; signalled: number } | null> {
    const [row] = await this.run<{ found: boolean; cancelled: number; signalled: number }>('cancelFlow', [id]);
    return row.found ? { cancelled: row.cancelled, signalled: row.signalled } : null;
  }

  async jobParents(jobId: string): Promise<ParentJob[]> {
    const rows = await this.run<ParentJob>('jobParents', [jobId]);
    return rows.map((r) => ({ ...r, result: r.result ?? null }));
  }

  async compensatedJob(jobId: string): Promise<CompensatedJob | null> {
    const [row] = await this.run<CompensatedJob>('compensatedJob', [jobId]);
    return row ? { ...row, result: row.result ?? null } : null;
  }

  async listFlows(status: FlowStatus | null, limit: number): Promise<FlowSummary[]> {
    const rows = await this.run<{ id: string; name: string | null; status: FlowStatus; reason: string | null; created_at: Date; finished_at: Date | null; jobs: number }>('listFlows', [status, limit]);
    return rows.map((r) => ({ id: r.id, name: r.name, status: r.status, reason: r.reason, createdAt: r.created_at, finishedAt: r.finished_at, jobs: r.jobs }));
  }

  /** Deletes up to `limit` flows finished more than `olderThanMs` ago whose jobs the pruner has deleted; returns how many. */
  async deleteFinishedFlows(olderThanMs: number, limit: number): Promise<number> {
    const [row] = await this.run<{ deleted: number }>('deleteFinishedFlows', [olderThanMs, limit]);
    return row.deleted;
  }
}

interface FlowRow {
  id: string;
  name: string | null;
  status: FlowStatus;
  failed_job_id: string | null;
  reason: string | null;
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
  jobs: (Omit<FlowJobRecord, 'runAt' | 'finishedAt' | 'waitingFor' | 'status'> & { status: JobStatus; buffered: boolean; runAt: string; finishedAt: string | null })[];
  edges: FlowEdge[];
}

/** The eleven column arrays of the flow input (FLOW_INPUT in flow.sql.ts), in order. */
function flowColumns({ rows }: FlowPlan): unknown[] {
  return [
    rows.map((r) => r.ref),
    rows.map((r) => r.queue),
    `[${rows.map((r) => r.payloadJson).join(',')}]`,
    rows.map((r) => r.priority),
    rows.map((r) => r.maxAttempts),
    rows.map((r) => r.runAt),
    rows.map((r) => r.delayMs),
    rows.map((r) => r.concurrencyKey),
    rows.map((r) => r.uniqueKey ?? null),
    `[${rows.map((r) => r.compensateJson ?? 'null').join(',')}]`,
    rows.map((r) => r.blocked),
  ];
}

function edgesJson(edges: FlowEdgeRow[]): string {
  return JSON.stringify(edges);
}

/** A flow job's unique key already held: the error names the job's ref; nothing of the flow was stored. */
function explainKeyConflict(error: unknown, plan: FlowPlan): unknown {
  const e = error as { code?: string; detail?: string };
  if (e?.code !== '23505') return error;
  // Some clients (Prisma) pass on the SQLSTATE without PostgreSQL's detail, which names the key.
  const match = typeof e.detail === 'string' ? /^Key \(queue_name, unique_key\)=\((.*)\) already exists\.$/s.exec(e.detail) : null;
  const keyed = plan.rows.filter((r) => r.uniqueKey != null);
  if (!match && keyed.length === 0) return error;
  const row = match ? keyed.find((r) => `${r.queue}, ${r.uniqueKey}` === match[1]) : keyed.length === 1 ? keyed[0] : undefined;
  const which = row
    ? `job "${row.ref}" (queue "${row.queue}", uniqueKey ${JSON.stringify(row.uniqueKey)})`
    : match
      ? `a job (${match[1]})`
      : `one of the jobs with a uniqueKey (${keyed.map((r) => `"${r.ref}"`).join(', ')})`;
  return new PgQueueError(`enqueueFlow: ${which}: another job holds the key; nothing of the flow was stored.`, { cause: error });
}
