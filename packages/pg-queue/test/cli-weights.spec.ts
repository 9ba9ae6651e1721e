import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase } from '@internal/pg-harness';
import pg from 'pg';
import { buildCli, runCli } from './support/run-cli.js';

// Issue 42, fair share weights from the command line (the real binary against a real database): stored, listed,
// removed; a bad argument is bad usage (exit 2) and stores nothing. Asserted from background_queue_weights.
describe('pg-queue weights', () => {
  let url: string;
  let sql: pg.Pool;
  const cli = (...args: string[]) => runCli(args, { DATABASE_URL: url });
  const stored = async () =>
    (await sql.query<{ key: string; weight: number }>(`SELECT key, weight FROM background_queue_weights WHERE queue_name = 'exports' ORDER BY key`)).rows;

  beforeAll(async () => {
    await buildCli();
    url = await createTestDatabase('cli_weights');
    sql = new pg.Pool({ connectionString: url, max: 2 });
    expect((await cli('migrate')).code).toBe(0);
  }, 180_000);
  afterAll(async () => {
    await sql?.end();
  });

  it('stores, lists and removes weights; refuses a bad one without storing any of the call', async () => {
    expect(await cli('weights', 'exports')).toEqual({ code: 0, stdout: 'no weight stored for exports: every key weighs what its fairness option says\n', stderr: '' });

    const set = await cli('weights', 'exports', 'tenant:42=3', 'a=b=2');
    expect(set).toMatchObject({ code: 0 });
    expect(set.stderr).toBe('stored 2 weights for exports\n');
    expect(await stored()).toEqual([{ key: 'a=b', weight: 2 }, { key: 'tenant:42', weight: 3 }]);
    expect(JSON.parse((await cli('weights', 'exports', '--json')).stdout)).toEqual({ 'a=b': 2, 'tenant:42': 3 });

    for (const bad of ['x=0', 'x=1001', 'x=1.5', 'x=', '=3', 'x']) {
      const refused = await cli('weights', 'exports', 'tenant:42=9', bad);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(/weight|key/);
    }
    expect(await stored()).toEqual([{ key: 'a=b', weight: 2 }, { key: 'tenant:42', weight: 3 }]);

    expect((await cli('weights', 'exports', 'tenant:42=default')).code).toBe(0);
    expect(await stored()).toEqual([{ key: 'a=b', weight: 2 }]);
  });
});
