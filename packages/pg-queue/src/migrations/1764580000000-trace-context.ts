import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * trace_context: the W3C Trace Context a job was enqueued under, as a JSON carrier
 * `{"traceparent": "00-<trace id>-<span id>-<flags>", "tracestate": "..."}` (tracestate optional), so that the
 * consumer span of its first attempt is a child of the producer's span and later attempts link to it
 * (docs/guides/tracing.md). Written only by an enqueue made while a span is active (an OpenTelemetry SDK is
 * registered); a raw-SQL producer may set it too. Nullable without a default: a catalog-only change, no
 * table rewrite; no index, since nothing searches by it.
 */
export class TraceContext1764580000000 implements MigrationInterface {
  name = 'TraceContext1764580000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE background_jobs ADD COLUMN IF NOT EXISTS trace_context jsonb`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE background_jobs DROP COLUMN IF EXISTS trace_context`);
  }
}
