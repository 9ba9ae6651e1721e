import type { Pool, QueryResultRow } from 'pg';
import { Statements } from './statements.js';
import type { StoredStep } from '../steps/step.interfaces.js';
import { STEP_SQL } from './step.sql.js';

/** The steps a job recorded, and the database's clock when they were read (epoch ms). */
export interface LoadedSteps {
  steps: StoredStep[];
  nowMs: number;
}

/**
 * Durable steps' table access, one method per statement of step.sql.ts, on the queue's own pool (never the app's:
 * a handler's step record must not wait behind the app's connections). Named statements unless a transaction
 * pooler sits in between.
 */
export class StepStore {
  private readonly statements: Statements<typeof STEP_SQL>;

  constructor(
    pool: Pool,
    options: { transactionPooler?: boolean } = {},
  ) {
    this.statements = new Statements(pool, STEP_SQL, 'pgq_step_', options);
  }

  private run<R extends QueryResultRow>(name: keyof typeof STEP_SQL, values: unknown[]): Promise<R[]> {
    return this.statements.rows<R>(name, values);
  }

  async loadSteps(jobId: string): Promise<LoadedSteps> {
    const [row] = await this.run<{ steps: StoredStep[] | null; now_ms: number }>('loadSteps', [jobId]);
    return { steps: row?.steps ?? [], nowMs: row?.now_ms ?? Date.now() };
  }

  /**
   * Appends a step (`entryJson`: {"name", "result"?} as JSON text) if this claim still holds the running job;
   * `sleepMs` makes it a sleep that ends that long from now. Returns the database's clock at the record, or
   * undefined when the claim no longer holds the job (nothing recorded).
   */
  async recordStep(workerId: string, job: { id: string; token: string }, entryJson: string, sleepMs: number | null): Promise<number | undefined> {
    const [row] = await this.run<{ now_ms: number }>('recordStep', [job.id, workerId, job.token, entryJson, sleepMs]);
    return row?.now_ms;
  }
}
