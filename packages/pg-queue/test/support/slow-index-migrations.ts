import type { MigrationInterface, QueryRunner } from 'typeorm';

// A table whose index takes seconds to build: the indexed function sleeps 1 ms a row.
export class CreateSlowRows1900000000001 implements MigrationInterface {
  name = 'CreateSlowRows1900000000001';
  async up(q: QueryRunner) {
    await q.query(`CREATE FUNCTION slow_key(n int) RETURNS int IMMUTABLE LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.001); RETURN n; END $$`);
    await q.query(`CREATE TABLE slow_rows AS SELECT g AS n FROM generate_series(1, 1500) g`);
  }
  async down() {}
}
// What an index migration looked like before createIndexConcurrently: IF NOT EXISTS alone.
export class SlowIndex1900000000002 implements MigrationInterface {
  name = 'SlowIndex1900000000002';
  transaction = false;
  async up(q: QueryRunner) {
    await q.query(`CREATE INDEX CONCURRENTLY IF NOT EXISTS slow_rows_key_idx ON slow_rows (slow_key(n))`);
  }
  async down() {}
}
