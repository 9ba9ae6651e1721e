import type { Pool, QueryConfig, QueryResultRow } from 'pg';
import { PgQueueError } from '../errors/pg-queue.error.js';
import { POOL_EXHAUSTED, POOLER_REFUSED_PREPARED_STATEMENT, POOLER_REFUSED_STARTUP_PARAMETER } from '../pg-queue.messages.js';
import { autocommitIds, autocommitQuery } from './autocommit-query.js';
import { PLANNED_PER_CALL, SQL } from './job.sql.js';
import type { JobStoreOptions } from './job-store.types.js';

/**
 * How the job store's verb files (enqueue.store.ts, claim.store.ts, settle.store.ts, maintenance.store.ts,
 * job-read.store.ts, job-control.store.ts) send a statement of SQL on the queue's pool: named (prepared) unless a
 * transaction pooler sits in between or the statement is planned per call, autocommit, with the pool's and the
 * pooler's errors explained.
 */
export class JobStatements {
  private readonly named: boolean;

  constructor(
    readonly pool: Pool,
    private readonly options: JobStoreOptions = {},
  ) {
    this.named = !options.transactionPooler;
  }

  statement(name: keyof typeof SQL, values: unknown[]): QueryConfig {
    return this.named && !PLANNED_PER_CALL.has(name) ? { name: `pgq_${name}`, text: SQL[name], values } : { text: SQL[name], values };
  }

  async run<R extends QueryResultRow>(name: keyof typeof SQL, values: unknown[]): Promise<R[]> {
    const query = this.statement(name, values);
    try {
      return (await autocommitQuery<R>(this.pool, query)).rows;
    } catch (error) {
      throw this.explainPoolError(error);
    }
  }

  /** run, for a statement that returns one column of ids (the inserts): their values, without a row object each (ids-query.ts). */
  async runIds(name: keyof typeof SQL, values: unknown[]): Promise<string[]> {
    try {
      return await autocommitIds(this.pool, this.statement(name, values));
    } catch (error) {
      throw this.explainPoolError(error);
    }
  }

  explainPoolError(error: unknown): unknown {
    // pg-pool's own wording when the wait for a free (or new) connection passes connectionTimeoutMillis.
    if (error instanceof Error && /^(timeout exceeded when trying to connect|Connection terminated due to connection timeout)$/.test(error.message)) {
      return new PgQueueError(POOL_EXHAUSTED(this.options.poolSize ?? this.pool.options.max, this.options.connectTimeoutMs ?? this.pool.options.connectionTimeoutMillis ?? 0, this.options.poolSizeOption), { cause: error });
    }
    return explainPoolerError(error);
  }
}

/**
 * A transaction pooler between the queue and PostgreSQL shows up as prepared statements that vanish or
 * already exist (each statement may land on another server connection), or as a refused startup
 * parameter: name the option that fixes it. Any other error passes through unchanged.
 */
export function explainPoolerError(error: unknown): unknown {
  const e = error as { code?: string; message?: string };
  if ((e.code === '26000' || e.code === '42P05') && /prepared statement/.test(e.message ?? '')) {
    return new PgQueueError(POOLER_REFUSED_PREPARED_STATEMENT(e.message!), { cause: error });
  }
  if (/unsupported startup parameter/.test(e.message ?? '')) {
    return new PgQueueError(POOLER_REFUSED_STARTUP_PARAMETER(e.message!), { cause: error });
  }
  return error;
}
