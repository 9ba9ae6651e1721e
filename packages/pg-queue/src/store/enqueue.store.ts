// Enqueue: the inserts of JobStore (plain, many, keyed, eager) and the deferred wake-up, one function each.
import type { ClientBase, PoolClient, QueryResultRow } from 'pg';
import type { CallerTransaction } from '../transactions/caller-transaction.js';
import { PgQueueError } from '../errors/pg-queue.error.js';
import { UNIQUE_HOLDER_UNSEEN } from '../pg-queue.messages.js';
import { toClaimedJob, type ClaimRow } from './claim.store.js';
import { inTransaction } from './in-transaction.js';
import { explainPoolerError, type JobStatements } from './job-statements.js';
import { SQL } from './job.sql.js';
import type { ClaimedJob, EnqueueOutcome, NewJobRow } from './job-store.types.js';
import type { Wake } from './shared.sql.js';
import { foldKeyedRows, unfoldOutcomes, type KeyedOutcome } from './unique-rows.js';

/**
 * `trace`: the enqueue's trace context as JSON text (tracing/trace-context.ts), written into the row(s); undefined
 * (no span active) keeps the untraced statement. `wake`: who wakes the workers (see Wake); 'deferred' applies
 * only outside a caller's transaction (the caller then wakes the queues once this resolves, committed).
 */
export async function insertJob(db: JobStatements, row: NewJobRow, tx?: CallerTransaction, trace?: string, wake: Wake = 'trigger'): Promise<string> {
  if (row.lifo) return (await insertJobs(db, [row], tx, trace, wake))[0];
  if (trace === undefined && row.priority === 0 && row.runAt === null && row.delayMs === 0 && row.concurrencyKey === null) {
    // No option but maxAttempts: the three-parameter insert (the columns' defaults are the options' defaults).
    const plain = [row.queue, row.payloadJson, row.maxAttempts];
    return tx ? (await tx.query<{ id: string }>(SQL.insertJobPlain, plain))[0].id : (await db.runIds(deferredIf(wake, 'insertJobPlain'), plain))[0];
  }
  const values: unknown[] = [row.queue, row.payloadJson, row.priority, row.maxAttempts, row.runAt, row.delayMs, row.concurrencyKey];
  const statement = trace === undefined ? 'insertJob' : 'insertJobTraced';
  if (trace !== undefined) values.push(trace);
  return tx ? (await tx.query<{ id: string }>(SQL[statement], values))[0].id : (await db.runIds(deferredIf(wake, statement), values))[0];
}

/**
 * The claim an eager insert makes: the worker's id and leases, and its copy of the queue's stored limits (JSON text of
 * background_queues.limits as its process last read it; null: none stored), which the row must still hold.
 */
export interface EagerClaim {
  workerId: string;
  bufferLeaseMs: number;
  leaseMs: number;
  storedLimits: string | null;
}

/**
 * Eager start (insertEagerJob in enqueue.sql.ts): inserts one due job (no runAt, delay, key) already claimed by
 * `claim.workerId` when the queue is not paused and no due job of its priority or higher waits; `job` is that
 * claim (absent: the job went in queued, and the trigger woke the workers). Autocommit, never in a caller's
 * transaction: the job may start only once its row is committed.
 */
export async function insertEagerJob(
  db: JobStatements,
  row: NewJobRow,
  claim: EagerClaim,
  trace?: string,
): Promise<{ id: string; job?: ClaimedJob }> {
  const values: unknown[] = [row.queue, row.payloadJson, row.priority, row.maxAttempts, claim.workerId, claim.bufferLeaseMs, claim.leaseMs];
  if (trace !== undefined) values.push(trace);
  values.push(claim.storedLimits);
  const [r] = await db.run<ClaimRow & { id: string; claimed: boolean }>(trace === undefined ? 'insertEagerJob' : 'insertEagerJobTraced', values);
  return r.claimed ? { id: r.id, job: toClaimedJob(r) } : { id: r.id };
}

/**
 * One statement when the payloads fit in one jsonb array; else one statement per chunk inside one
 * transaction (the caller's, through a savepoint, or one of its own), so the call stays all-or-nothing.
 */
export async function insertJobs(db: JobStatements, rows: NewJobRow[], tx?: CallerTransaction, trace?: string, wake: Wake = 'trigger'): Promise<string[]> {
  const chunks = chunkByPayloadSize(rows, INSERT_CHUNK_CHARS);
  if (chunks.length === 1) {
    const { statement, values } = insertJobsStatement(rows, trace);
    return tx ? (await tx.query<{ id: string }>(SQL[statement], values)).map((r) => r.id) : db.runIds(deferredIf(wake, statement), values);
  }
  if (tx) return tx.atomically((inner) => insertChunks(chunks, (text, values) => inner.query(text, values), trace));
  // Unnamed statements: planning is nothing next to 16 MB of payload, and this rare call pins no prepared statement.
  return inTransaction(db.pool, (client) => insertChunks(chunks, async (text, values) => (await client.query<{ id: string }>({ text, values })).rows, trace, wake));
}

/**
 * Jobs of which some have a unique key: one statement (per 16 MB of payloads, in one transaction), each
 * row's outcome in input order. A row whose holder committed after the statement's snapshot comes back
 * without one and is sent again, alone with the others in that case, with a fresh snapshot.
 */
export async function insertKeyedJobs(db: JobStatements, rows: NewJobRow[], tx?: CallerTransaction, trace?: string, wake: Wake = 'trigger'): Promise<KeyedOutcome[]> {
  // LIFO and 'queue-after' take the SQL enqueue function (insertThroughFunction); every other call the statement below.
  if (rows.some((r) => r.lifo || r.onConflict === 'queue-after')) return insertThroughFunction(db, rows, tx, trace);
  const { folded, slotOf } = foldKeyedRows(rows);
  const chunks = chunkByPayloadSize(folded, INSERT_CHUNK_CHARS);
  const insertAll = async (query: KeyedQuery) => {
    const outcomes: KeyedOutcome[] = [];
    for (const chunk of chunks) outcomes.push(...(await insertKeyedChunk(chunk, query, trace)));
    return outcomes;
  };
  let outcomes: KeyedOutcome[];
  if (chunks.length === 1) {
    outcomes = await insertAll(tx ? (name, values) => tx.query(SQL[name], values) : (name, values) => db.run(deferredIf(wake, name), values));
  } else if (tx) {
    outcomes = await tx.atomically((inner) => insertAll((name, values) => inner.query(SQL[name], values)));
  } else {
    outcomes = await inTransaction(db.pool, (client) => insertAll(async (name, values) => (await client.query({ text: SQL[deferredIf(wake, name)], values })).rows));
  }
  return unfoldOutcomes(rows, slotOf, outcomes);
}

/**
 * The deferred wake-up of enqueues that skipped the NOTIFY trigger: one NOTIFY per queue, in one statement, on the
 * wake sender's connection, or on one of the pool's while that connection is down.
 */
export async function wakeQueues(db: JobStatements, queues: string[], client?: ClientBase): Promise<void> {
  if (!client) {
    await db.run('wakeQueues', [queues]);
    return;
  }
  try {
    await client.query(db.statement('wakeQueues', [queues]));
  } catch (error) {
    throw explainPoolerError(error);
  }
}

/**
 * enqueueMany's statements on a connection inside a transaction of the caller's: a recurring job's fire
 * claim and its jobs commit together (store/schedule.store.ts).
 */
export async function insertJobsOn(client: PoolClient, rows: NewJobRow[]): Promise<string[]> {
  return insertChunks(chunkByPayloadSize(rows, INSERT_CHUNK_CHARS), async (text, values) => (await client.query<{ id: string }>({ text, values })).rows);
}

/**
 * Payload characters per insert statement. PostgreSQL caps one jsonb value (the statement's array of
 * payloads) at 256 MB, and jsonb takes up to 6 times the text's size (an array of small numbers): 16 MiB stays below.
 */
const INSERT_CHUNK_CHARS = 16 * 1_048_576;

/** Consecutive runs of rows whose payloads add up to at most `maxChars` (a row over it goes alone). */
function chunkByPayloadSize(rows: NewJobRow[], maxChars: number): NewJobRow[][] {
  const chunks: NewJobRow[][] = [];
  let chunk: NewJobRow[] = [];
  let chars = 0;
  for (const row of rows) {
    if (chunk.length > 0 && chars + row.payloadJson.length > maxChars) {
      chunks.push(chunk);
      chunk = [];
      chars = 0;
    }
    chunk.push(row);
    chars += row.payloadJson.length;
  }
  chunks.push(chunk);
  return chunks;
}

/**
 * The keyed jobs of a call with a LIFO job or an onConflict 'queue-after': one call of pg_queue_enqueue_jobs (the SQL
 * enqueue function's body, migration LifoQueueAfter1764700000000) per 16 MB of payloads, in one transaction, which folds
 * the jobs of one key, takes a 'queue-after' key's successor row before it looks at the holder, and returns each
 * job's outcome in input order. The rows were checked here already; the function checks them again, as it checks any
 * caller's. Its inserts wake the workers through the table's trigger, at the commit.
 */
async function insertThroughFunction(db: JobStatements, rows: NewJobRow[], tx: CallerTransaction | undefined, trace: string | undefined): Promise<KeyedOutcome[]> {
  const chunks = chunkByPayloadSize(rows, INSERT_CHUNK_CHARS);
  const run = async (query: (text: string, values: unknown[]) => Promise<{ id: string; outcome: EnqueueOutcome }[]>) => {
    const outcomes: KeyedOutcome[] = [];
    for (const chunk of chunks) for (const r of await query(SQL.enqueueJobsFunction, [functionSpecs(chunk, trace)])) outcomes.push({ id: r.id, outcome: r.outcome });
    return outcomes;
  };
  if (tx) return chunks.length === 1 ? run((text, values) => tx.query(text, values)) : tx.atomically((inner) => run((text, values) => inner.query(text, values)));
  if (chunks.length === 1) return (await db.run<{ id: string; outcome: EnqueueOutcome }>('enqueueJobsFunction', [functionSpecs(rows, trace)])).map((r) => ({ id: r.id, outcome: r.outcome }));
  return inTransaction(db.pool, (client) => run(async (text, values) => (await client.query<{ id: string; outcome: EnqueueOutcome }>({ text, values })).rows));
}

/** The rows as the SQL enqueue function reads them: a JSON array of { queue, payload, ...options } (payloads as they are). */
function functionSpecs(rows: NewJobRow[], trace: string | undefined): string {
  return `[${rows
    .map((r) => {
      const options = {
        queue: r.queue,
        priority: r.priority,
        max_attempts: r.maxAttempts,
        ...(r.runAt === null ? { delay_ms: r.delayMs } : { run_at: r.runAt.toISOString() }),
        ...(r.uniqueKey == null ? {} : { unique_key: r.uniqueKey, on_conflict: r.onConflict ?? 'keep' }),
        ...(r.uniqueForMs == null ? {} : { unique_for_ms: r.uniqueForMs }),
        ...(r.concurrencyKey === null ? {} : { concurrency_key: r.concurrencyKey }),
        ...(r.lifo ? { lifo: true } : {}),
      };
      const json = JSON.stringify(options);
      return `${json.slice(0, -1)},"payload":${r.payloadJson}${trace === undefined ? '' : `,"trace_context":${trace}`}}`;
    })
    .join(',')}]`;
}

/** Inserts the chunks one statement each, in order; the ids in input order. */
async function insertChunks(chunks: NewJobRow[][], query: (text: string, values: unknown[]) => Promise<{ id: string }[]>, trace?: string, wake: Wake = 'trigger'): Promise<string[]> {
  const ids: string[] = [];
  for (const chunk of chunks) {
    const { statement, values } = insertJobsStatement(chunk, trace);
    for (const r of await query(SQL[deferredIf(wake, statement)], values)) ids.push(r.id);
  }
  return ids;
}

/** The insert statement's variant that leaves the wake-up to the caller, when `wake` says so. */
function deferredIf<S extends InsertStatement>(wake: Wake, statement: S): S | `${S}WakeDeferred` {
  return wake === 'deferred' ? `${statement}WakeDeferred` : statement;
}

type InsertStatement = 'insertJob' | 'insertJobPlain' | 'insertJobTraced' | ReturnType<typeof insertJobsStatement>['statement'] | Parameters<KeyedQuery>[0];

type KeyedQuery = (statement: 'insertKeyedJob' | 'insertKeyedJobs' | 'insertKeyedJobTraced' | 'insertKeyedJobsTraced', values: unknown[]) => Promise<QueryResultRow[]>;

/** Rounds of insertKeyedJobs for rows whose holder was not yet visible; each round waited for that holder's commit. */
const KEYED_INSERT_ROUNDS = 10;

async function insertKeyedChunk(rows: NewJobRow[], query: KeyedQuery, trace: string | undefined): Promise<KeyedOutcome[]> {
  const outcomes = new Array<KeyedOutcome>(rows.length);
  let pending = rows.map((_, i) => i);
  for (let round = 0; pending.length > 0; round++) {
    if (round === KEYED_INSERT_ROUNDS) throw new PgQueueError(UNIQUE_HOLDER_UNSEEN(KEYED_INSERT_ROUNDS));
    const batch = pending.map((i) => rows[i]);
    const values = [
      batch.map((r) => r.queue),
      `[${batch.map((r) => r.payloadJson).join(',')}]`,
      batch.map((r) => r.priority),
      batch.map((r) => r.maxAttempts),
      batch.map((r) => r.runAt),
      batch.map((r) => r.delayMs),
      batch.map((r) => r.uniqueKey ?? null),
      batch.map((r) => r.onConflict ?? 'keep'),
      batch.map((r) => r.uniqueForMs ?? null),
      batch.map((r) => r.concurrencyKey ?? null),
    ];
    let statement: Parameters<KeyedQuery>[0] = batch.length === 1 ? 'insertKeyedJob' : 'insertKeyedJobs';
    if (trace !== undefined) {
      statement = batch.length === 1 ? 'insertKeyedJobTraced' : 'insertKeyedJobsTraced';
      values.push(trace);
    }
    const result = (await query(statement, values)) as { ord: string; id: string | null; outcome: EnqueueOutcome | null }[];
    const next: number[] = [];
    for (const r of result) {
      const index = pending[Number(r.ord) - 1];
      if (r.outcome === null || r.id === null) next.push(index);
      else outcomes[index] = { id: r.id, outcome: r.outcome };
    }
    pending = next;
  }
  return outcomes;
}

/** The scalar statement when every row goes to one queue with the same options, else the array one; with a LIFO row, insertLifoJobs. */
function insertJobsStatement(
  rows: NewJobRow[],
  trace?: string,
): { statement: 'insertJobs' | 'insertUniformJobs' | 'insertJobsTraced' | 'insertUniformJobsTraced' | 'insertLifoJobs' | 'insertLifoJobsTraced'; values: unknown[] } {
  const payloads = `[${rows.map((r) => r.payloadJson).join(',')}]`;
  if (rows.some((r) => r.lifo)) {
    const values = [rows.map((r) => r.queue), payloads, rows.map((r) => r.priority), rows.map((r) => r.maxAttempts), rows.map((r) => r.runAt), rows.map((r) => r.delayMs), rows.map((r) => r.concurrencyKey), rows.map((r) => r.lifo === true)];
    if (trace === undefined) return { statement: 'insertLifoJobs', values };
    values.push(trace);
    return { statement: 'insertLifoJobsTraced', values };
  }
  const first = rows[0];
  const uniform = rows.every(
    (r) =>
      r.queue === first.queue &&
      r.priority === first.priority &&
      r.maxAttempts === first.maxAttempts &&
      r.delayMs === first.delayMs &&
      r.runAt?.getTime() === first.runAt?.getTime() &&
      r.concurrencyKey === first.concurrencyKey,
  );
  const values = uniform
    ? [first.queue, payloads, first.priority, first.maxAttempts, first.runAt, first.delayMs, first.concurrencyKey]
    : [rows.map((r) => r.queue), payloads, rows.map((r) => r.priority), rows.map((r) => r.maxAttempts), rows.map((r) => r.runAt), rows.map((r) => r.delayMs), rows.map((r) => r.concurrencyKey)];
  if (trace === undefined) return { statement: uniform ? 'insertUniformJobs' : 'insertJobs', values };
  values.push(trace);
  return { statement: uniform ? 'insertUniformJobsTraced' : 'insertJobsTraced', values };
}
