import type { MigrationInterface, QueryRunner } from 'typeorm';
import { flowStepFunction } from '../store/flow-functions.sql.js';

/**
 * Operator actions on finished flows (issue 39, items 12-14): pg_queue_flow_step learns that retry() of a compensation
 * of a flow that ended `compensation_failed` makes the flow `compensating` again, so that its settle ends it
 * `compensated` once every compensation completed (before, it stayed compensation_failed for ever).
 * Replaces the function only (CREATE OR REPLACE: no lock on any table, no rewrite), so it runs online. Until it runs,
 * a newer library behaves as the older one did on that one path; an older library with the new function sees only
 * that path change. `down` puts the function back as the Flows migration created it.
 */
export class FlowOperatorActions1764671390000 implements MigrationInterface {
  name = 'FlowOperatorActions1764671390000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(flowStepFunction(true));
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(flowStepFunction(false));
  }
}
