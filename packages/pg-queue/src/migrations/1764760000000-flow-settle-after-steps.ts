import type { MigrationInterface, QueryRunner } from 'typeorm';
import { FLOW_ADVANCE_FUNCTION } from '../store/flow-functions.sql.js';

/**
 * A statement that ends several jobs of one flow settles the flow once, after every one of them has had its step.
 *
 * Why: each job's step (pg_queue_flow_step) ended with the flow's settle. A bulk cancel that took two jobs of one
 * flow stepped them in id order: the first, whose only dependent continues past it, failed nothing, and with the
 * second already cancelled by the same statement nothing of the flow was live, so the settle ended the flow
 * `completed`; the second's cancel, which fails the flow, then found it over (the simulation's seed 595149389;
 * flows-bulk-cancel.spec.ts). pg_queue_flow_advance is the step without the settle, answering whether to settle;
 * the statements (stepFlows) step every row first and settle each flow once after (flow-functions.sql.ts).
 * pg_queue_flow_step stays as it was, for an older instance's statements during a rolling upgrade.
 */
export class FlowSettleAfterSteps1764760000000 implements MigrationInterface {
  name = 'FlowSettleAfterSteps1764760000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(FLOW_ADVANCE_FUNCTION);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP FUNCTION IF EXISTS pg_queue_flow_advance(bigint, bigint, text, bigint, text, text)`);
  }
}
