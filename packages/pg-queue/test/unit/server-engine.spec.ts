import { describe, expect, it } from '@jest/globals';
import { serverEngine } from '../../src/connection/server-engine.js';
import { DISTRIBUTED_POSTGRES_GUIDE, NOT_POSTGRESQL_SERVER } from '../../src/pg-queue.messages.js';

// version() as each engine reports it, from their documentation and published sessions (sources on
// docs/guides/distributed-postgres.md).
const COCKROACHDB = [
  // `cockroach sql` prints the server's version() in its banner (cockroachlabs.com/docs/stable/cockroach-sql).
  'CockroachDB CCL v19.2.0 (x86_64-apple-darwin17.7.0, built 2019/09/13 00:07:19, go1.12.6)',
  'CockroachDB CCL v21.1.1 (x86_64-apple-darwin19, built 2021/05/24 15:00:00, go1.15.11)',
  'CockroachDB CCL v23.1.11 (x86_64-pc-linux-gnu, built ...)',
];
const YUGABYTEDB = [
  // YugabyteDB 2.25, the first based on PostgreSQL 15 (dev.to/yugabyte, "PostgreSQL 15 Compatibility in YugabyteDB 2.25").
  'PostgreSQL 15.2-YB-2.25.0.0-b0 on aarch64-unknown-linux-gnu, compiled by clang version 17.0.6 (https://github.com/yugabyte/llvm-project.git 9b881774e40024e901fc6f3d313607b071c08631), 64-bit',
  // The PostgreSQL 11 based releases (psql's banner: "server 11.2-YB-2.18.0.1-b0").
  'PostgreSQL 11.2-YB-2.20.1.0-b0 on x86_64-pc-linux-gnu',
  'PostgreSQL 15.12-YB-2025.2.3.0-b1',
];
const POSTGRESQL = [
  // Aurora PostgreSQL reports the community version (docs.aws.amazon.com, Amazon Aurora versioning).
  'PostgreSQL 11.7 on x86_64-pc-linux-gnu, compiled by gcc (GCC) 4.9.3, 64-bit',
];

describe('serverEngine: which engine a server is, from version() and what an engine built on PostgreSQL adds', () => {
  it.each(COCKROACHDB)('CockroachDB is refused: %s', (version) => {
    expect(serverEngine({ version })).toEqual({ supported: false, engine: 'CockroachDB' });
  });

  it.each(YUGABYTEDB)('YugabyteDB is refused: %s', (version) => {
    expect(serverEngine({ version })).toEqual({ supported: false, engine: 'YugabyteDB' });
  });

  it.each(POSTGRESQL)('PostgreSQL is allowed: %s', (version) => {
    expect(serverEngine({ version })).toEqual({ supported: true, engine: 'PostgreSQL' });
    expect(serverEngine({ version, limitlessTableMode: null, citusVersion: null })).toEqual({ supported: true, engine: 'PostgreSQL' });
  });

  it('Aurora PostgreSQL Limitless Database (its table-mode setting is set, "standard" by default) is refused', () => {
    expect(serverEngine({ version: 'PostgreSQL 16.6 on aarch64-unknown-linux-gnu', limitlessTableMode: 'standard' }))
      .toEqual({ supported: false, engine: 'Aurora PostgreSQL Limitless Database' });
  });

  it('Citus is PostgreSQL with an extension: allowed, its version kept for the log line', () => {
    expect(serverEngine({ version: POSTGRESQL[0], limitlessTableMode: null, citusVersion: '13.2-1' })).toEqual({ supported: true, engine: 'PostgreSQL', citusVersion: '13.2-1' });
  });

  it('any other engine is refused by the name it gives itself', () => {
    expect(serverEngine({ version: 'Redpanda SQL 1.2.0 (abc1234)' })).toEqual({ supported: false, engine: 'an engine that reports itself as "Redpanda SQL"' });
    expect(serverEngine({ version: '' })).toEqual({ supported: false, engine: 'an engine whose version() is empty' });
  });

  it("the refusal names the engine, quotes its version() (long ones cut) and links the guide", () => {
    const message = NOT_POSTGRESQL_SERVER('YugabyteDB', YUGABYTEDB[0]);
    expect(message).toContain('this server is YugabyteDB (version(): "PostgreSQL 15.2-YB-2.25.0.0-b0 on aarch64');
    expect(message).toContain('...")');
    expect(message).toContain(DISTRIBUTED_POSTGRES_GUIDE);
    expect(DISTRIBUTED_POSTGRES_GUIDE).toMatch(/\/docs\/guides\/distributed-postgres\.md$/);
  });
});
