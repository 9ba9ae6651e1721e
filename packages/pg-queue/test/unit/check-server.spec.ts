import { describe, expect, it } from '@jest/globals';
import { checkServer, type ServerRows } from '../../src/connection/check-server.js';
import { DATABASE_SQL } from '../../src/store/database.sql.js';

// The branches a real PostgreSQL cannot show (Citus installed, a server that does not answer); the refusals run on a
// real server in test/server-engine.spec.ts.
const POSTGRES = 'PostgreSQL 18.4 on x86_64-pc-linux-gnu';

function server(answers: Record<string, Record<string, unknown>[] | Error>): { rows: ServerRows; asked: string[] } {
  const asked: string[] = [];
  const rows: ServerRows = async (sql) => {
    asked.push(sql);
    const answer = answers[sql];
    if (answer instanceof Error) throw answer;
    return answer;
  };
  return { rows, asked };
}

function logger(): { log: (m: unknown) => void; warn: (m: unknown) => void; lines: string[] } {
  const lines: string[] = [];
  return { lines, log: (m) => lines.push(`log: ${String(m)}`), warn: (m) => lines.push(`warn: ${String(m)}`) };
}

describe('checkServer', () => {
  it('PostgreSQL passes silently after asking version() and then what an engine built on it adds', async () => {
    const s = server({ [DATABASE_SQL.serverVersion]: [{ version: POSTGRES }], [DATABASE_SQL.serverAdditions]: [{ limitless: null, citus: null }] });
    const log = logger();
    await checkServer(s.rows, log, true);
    expect(s.asked).toEqual([DATABASE_SQL.serverVersion, DATABASE_SQL.serverAdditions]);
    expect(log.lines).toEqual([]);
  });

  it('CockroachDB is refused on its version() alone: nothing more is asked of it', async () => {
    const s = server({ [DATABASE_SQL.serverVersion]: [{ version: 'CockroachDB CCL v23.1.11 (x86_64-pc-linux-gnu, built ...)' }] });
    await expect(checkServer(s.rows, logger(), false)).rejects.toThrow('this server is CockroachDB');
    expect(s.asked).toEqual([DATABASE_SQL.serverVersion]);
  });

  it('Citus is logged, with its version, and allowed', async () => {
    const log = logger();
    await checkServer(server({ [DATABASE_SQL.serverVersion]: [{ version: POSTGRES }], [DATABASE_SQL.serverAdditions]: [{ limitless: null, citus: '13.2-1' }] }).rows, log, true);
    expect(log.lines).toEqual([expect.stringMatching(/^log: the citus extension \(13\.2-1\) is installed: the queue's tables are plain local tables/)]);
  });

  it('additions that cannot be read are a warning: the server said PostgreSQL', async () => {
    const log = logger();
    await checkServer(server({ [DATABASE_SQL.serverVersion]: [{ version: POSTGRES }], [DATABASE_SQL.serverAdditions]: new Error('relation "pg_catalog.pg_extension" does not exist') }).rows, log, true);
    expect(log.lines).toEqual([expect.stringMatching(/^warn: could not read which engine .*pg_extension" does not exist/)]);
  });

  it('a server that does not answer fails the check where migrations need it, and is a warning where not', async () => {
    const down = server({ [DATABASE_SQL.serverVersion]: new Error('connect ECONNREFUSED 127.0.0.1:5432') });
    await expect(checkServer(down.rows, logger(), true)).rejects.toThrow('ECONNREFUSED');
    const log = logger();
    await checkServer(down.rows, log, false);
    expect(log.lines).toEqual([expect.stringMatching(/^warn: could not ask the database server what it is at boot \(.*ECONNREFUSED/)]);
  });
});
