import pg from 'pg';
import { sleep } from '../host/clock.js';

/** What the backends of one database waited on while a piece of work ran, sampled from pg_stat_activity. */
export interface WaitSummary {
  samples: number;
  /** Backends waiting on `Lock:object` per sample (the lock PostgreSQL takes to serialise the commits of transactions that called pg_notify). */
  lockObjectMean: number;
  lockObjectMax: number;
  /** Active backends per sample. */
  activeMean: number;
  /** Every wait event seen, as "Type:Event mean-per-sample", commonest first. */
  top: string;
}

const SAMPLE_MS = 20;

/**
 * Samples pg_stat_activity of `database` every 20 ms (from the maintenance database, on a connection of its
 * own, so the sampling is not counted as the system's traffic) until `work` settles.
 */
export async function sampleWaits<T>(serverUrl: string, database: string, work: Promise<T>): Promise<{ result: T; waits: WaitSummary }> {
  const client = new pg.Client({ connectionString: serverUrl, application_name: 'bench wait sampler' });
  await client.connect();
  let done = false;
  const settled = work.finally(() => (done = true));
  // Awaited after the sampling loop; until then a failure must not count as an unhandled rejection.
  settled.catch(() => undefined);
  const counts = new Map<string, number>();
  let samples = 0;
  let lockSum = 0;
  let lockMax = 0;
  let activeSum = 0;
  try {
    while (!done) {
      const { rows } = await client.query<{ w: string | null; n: number }>(
        `SELECT wait_event_type || ':' || wait_event AS w, count(*)::int AS n
         FROM pg_stat_activity WHERE datname = $1 AND state = 'active' AND backend_type = 'client backend'
         GROUP BY 1`,
        [database],
      );
      samples++;
      let lock = 0;
      for (const r of rows) {
        activeSum += r.n;
        const w = r.w ?? 'CPU (no wait)';
        counts.set(w, (counts.get(w) ?? 0) + r.n);
        if (w === 'Lock:object') lock = r.n;
      }
      lockSum += lock;
      lockMax = Math.max(lockMax, lock);
      if (!done) await sleep(SAMPLE_MS);
    }
  } finally {
    await client.end();
  }
  const result = await settled;
  const per = (n: number) => (samples ? n / samples : NaN);
  const top = [...counts.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 5)
    .map(([w, n]) => `${w} ${per(n).toFixed(1)}`)
    .join(', ');
  return { result, waits: { samples, lockObjectMean: per(lockSum), lockObjectMax: lockMax, activeMean: per(activeSum), top } };
}

/**
 * Switches off (or back on) the triggers of `table` whose function calls pg_notify: the reference row of the
 * concurrent enqueue (the same inserts without the NOTIFY commit lock). Found by what they do, not by name,
 * so the row stays right if the trigger is renamed. Returns their names (none: nothing to compare).
 */
export async function setNotifyTriggers(url: string, table: string, enabled: boolean): Promise<string[]> {
  const client = new pg.Client({ connectionString: url, application_name: 'bench orchestrator' });
  await client.connect();
  try {
    const { rows } = await client.query<{ name: string }>(
      `SELECT t.tgname AS name FROM pg_trigger AS t JOIN pg_proc AS p ON p.oid = t.tgfoid
       WHERE t.tgrelid = $1::regclass AND NOT t.tgisinternal AND p.prosrc ILIKE '%pg_notify%'`,
      [table],
    );
    for (const { name } of rows) {
      await client.query(`ALTER TABLE ${client.escapeIdentifier(table)} ${enabled ? 'ENABLE' : 'DISABLE'} TRIGGER ${client.escapeIdentifier(name)}`);
    }
    return rows.map((r) => r.name);
  } finally {
    await client.end();
  }
}
