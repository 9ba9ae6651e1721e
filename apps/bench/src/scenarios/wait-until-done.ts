import pg from 'pg';
import { nowMs, sleep } from '../host/clock.js';
import type { SystemProcess } from '../host/system-process.js';

export interface DoneResult {
  /** Epoch ms of the first handler start across all processes. */
  firstAt: number;
  /** Epoch ms at which the database first showed every job finished. */
  doneAt: number;
  /** Handler calls across all processes (more than the jobs means some ran twice). */
  handled: number;
  /** Handler calls of each process, in the order given. */
  perProcess: number[];
}

/**
 * "All done" means recorded as done in the database, not just handed to a handler: a library that batches
 * its completions is only finished when the last batch has landed. First the children's handler counts are
 * watched (cheap, over IPC) until every job has started, then the database is polled every 10 ms (an index probe;
 * backing off if it is ever slow) until none is left unfinished; the poll never runs while the bulk of the
 * work does, so it costs the systems next to nothing.
 */
export async function waitUntilDone(procs: SystemProcess[], dbUrl: string, busySql: string, jobs: number, timeoutMs: number): Promise<DoneResult> {
  const deadline = nowMs() + timeoutMs;
  let handled = 0;
  let firstAt = Infinity;
  for (;;) {
    const stats = await Promise.all(procs.map((p) => p.stats()));
    handled = stats.reduce((sum, s) => sum + s.handled, 0);
    firstAt = Math.min(...stats.map((s) => s.firstAt ?? Infinity));
    if (handled >= jobs) break;
    if (nowMs() > deadline) throw new Error(`timed out: ${handled} of ${jobs} jobs started after ${timeoutMs} ms`);
    await sleep(25);
  }
  const client = new pg.Client({ connectionString: dbUrl, application_name: 'bench orchestrator' });
  await client.connect();
  try {
    for (;;) {
      const asked = nowMs();
      const { rows } = await client.query<{ busy: boolean }>(busySql);
      if (!rows[0].busy) {
        const doneAt = nowMs();
        const stats = await Promise.all(procs.map((p) => p.stats()));
        return { firstAt, doneAt, handled: stats.reduce((sum, s) => sum + s.handled, 0), perProcess: stats.map((s) => s.handled) };
      }
      if (nowMs() > deadline) throw new Error(`timed out: jobs still unfinished after ${timeoutMs} ms`);
      // Every 10 ms, but never more than a third of the time: a slow probe must not load the system it watches.
      await sleep(Math.max(10, 2 * (nowMs() - asked)));
    }
  } finally {
    await client.end();
  }
}
