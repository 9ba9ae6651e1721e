import pg from 'pg';
import { QUEUE, work, type Adapter, type AdapterOptions, type BenchPayload, type RunningSystem } from './types.js';

/**
 * The reference: the best hand-written batched SKIP LOCKED loop we know, on nestjs-pg-queue's own table,
 * indexes and NOTIFY trigger (the benchmark creates them with the library's migrations before this system
 * starts; see host/system-process.ts), so that it pays for the same row versions and index entries per job
 * and the difference is what the library spends on its guarantees.
 *
 * What it does NOT do, and a library must: no lease (a crashed loop leaves its batch in 'processing' for
 * ever), no heartbeat, no fencing of a completion against a job taken over by someone else, no retries,
 * backoff or dead-lettering (a handler error would be a bug here), no timeouts, no graceful drain of claimed
 * jobs, no pruning of finished rows, no metrics or events. "At least 0.9x this loop" is therefore a real bar.
 */

/**
 * The claim: one autocommit statement locks and marks up to $2 due jobs in the claim index's order
 * (queue_name, priority DESC, run_at, id WHERE status = 'queued'); SKIP LOCKED keeps the loops apart.
 */
const CLAIM = `
  UPDATE background_jobs SET status = 'processing', locked_at = now(), attempts = attempts + 1, updated_at = now()
  WHERE id IN (
    SELECT id FROM background_jobs
    WHERE queue_name = $1 AND status = 'queued' AND run_at <= now()
    ORDER BY priority DESC, run_at, id
    LIMIT $2
    FOR UPDATE SKIP LOCKED)
  RETURNING id, payload`;
/** One statement completes a whole batch; finished_at as the library writes it (its finished-jobs index covers it). */
const COMPLETE = `UPDATE background_jobs SET status = 'completed', finished_at = now(), updated_at = now() WHERE id = ANY($1::int8[])`;
const INSERT_ONE = `INSERT INTO background_jobs (queue_name, payload) VALUES ($1, $2::jsonb)`;
/**
 * BENCH_PLAIN_RETURNING=1: the loop's one-at-a-time INSERT also returns the new id, as an enqueue API must (ours
 * does). A reference for re-measuring only: it tells the cost of the answer from the cost of the library.
 */
function insertOne(): string {
  const mode = process.env.BENCH_PLAIN_RETURNING;
  if (mode === undefined || mode === '' || mode === '0') return INSERT_ONE;
  if (mode !== '1') throw new Error(`BENCH_PLAIN_RETURNING must be "1" or "0"; got "${mode}"`);
  return `${INSERT_ONE} RETURNING id`;
}
const INSERT_MANY = `INSERT INTO background_jobs (queue_name, payload) SELECT $1, p FROM unnest($2::jsonb[]) AS p RETURNING id`;
/** The library's NOTIFY trigger sends the queue name on this channel once per inserting statement. */
const CHANNEL = 'pg_queue_jobs';

/** One idle loop looks this often in case a NOTIFY was missed or a delayed job fell due. */
const POLL_MS = 1_000;

/** Jobs one loop claims at a time (the hand-written loop: 100). */
const BATCH = 100;

/**
 * How the plain loop spends `concurrency`: that many loops, each claiming up to 100 due jobs, running them
 * one after another (so `concurrency` jobs run at once) and completing the batch in one statement. It holds
 * up to concurrency x 100 jobs (1,000 at c=10, 5,000 at c=50): at least as many as the libraries hold (500).
 */
export function plainShape(concurrency: number): { loops: number; batch: number } {
  const override = process.env.BENCH_PLAIN_SHAPE; // "loops x batch", for re-tuning only
  if (override) {
    const [loops, batch] = override.split('x').map(Number);
    if (!(loops >= 1 && batch >= 1)) throw new Error(`BENCH_PLAIN_SHAPE must be "<loops>x<batch>", e.g. 10x100; got "${override}"`);
    return { loops, batch };
  }
  return { loops: concurrency, batch: BATCH };
}

export const plainSqlAdapter: Adapter = {
  async start(options: AdapterOptions): Promise<RunningSystem> {
    const pool = new pg.Pool({ connectionString: options.url, max: options.poolSize, application_name: `bench plain-sql ${options.role}` });
    pool.on('error', (error) => console.error(`[plain-sql pool] ${error.message}`));
    const insertOneText = insertOne();
    await requireSchema(pool).catch(async (error: unknown) => {
      await pool.end();
      throw error;
    });
    let stopping = false;
    let listener: pg.Client | undefined;
    let poller: NodeJS.Timeout | undefined;
    const loops: Promise<void>[] = [];
    // Idle loops wait here. A NOTIFY or the poll wakes one; a loop whose claim came back full wakes all the
    // others (the queue is deep). So one job costs one claim, and a bulk insert has every loop busy after two.
    const idle: (() => void)[] = [];
    let notified = 0;
    const wakeOne = () => idle.shift()?.();
    const wakeAll = () => idle.splice(0).forEach((resolve) => resolve());
    if (options.role === 'worker') {
      listener = new pg.Client({ connectionString: options.url, application_name: 'bench plain-sql listener' });
      await listener.connect();
      listener.on('notification', () => {
        notified++;
        wakeOne();
      });
      await listener.query(`LISTEN ${CHANNEL}`);
      poller = setInterval(wakeOne, POLL_MS);
      const { loops: count, batch } = plainShape(options.concurrency);
      const loop = async () => {
        while (!stopping) {
          const seen = notified;
          const { rows } = await pool.query<{ id: string; payload: BenchPayload }>({ name: 'claim', text: CLAIM, values: [QUEUE, batch] });
          if (rows.length === 0) {
            // A NOTIFY during the claim may be for jobs it did not see: claim again instead of sleeping.
            if (seen === notified && !stopping) await new Promise<void>((resolve) => idle.push(resolve));
            continue;
          }
          if (rows.length === batch) wakeAll();
          for (const row of rows) {
            options.onJob(row.payload);
            const running = work(options.jobMs);
            if (running) await running;
          }
          await pool.query({ name: 'complete', text: COMPLETE, values: [rows.map((r) => r.id)] });
        }
      };
      for (let i = 0; i < count; i++) loops.push(loop());
    }
    return {
      enqueue: async (payload) => void (await pool.query({ name: 'insert_one', text: insertOneText, values: [QUEUE, JSON.stringify(payload)] })),
      enqueueMany: async (payloads) =>
        (await pool.query({ name: 'insert_many', text: INSERT_MANY, values: [QUEUE, payloads.map((p) => JSON.stringify(p))] })).rowCount ?? 0,
      stop: async () => {
        stopping = true;
        clearInterval(poller);
        wakeAll();
        await Promise.all(loops);
        await listener?.end();
        await pool.end();
      },
    };
  },
};

/** The loop brings no schema of its own: it runs on the library's, which must already be there. */
async function requireSchema(pool: pg.Pool): Promise<void> {
  const { rows } = await pool.query<{ ok: boolean }>(`SELECT to_regclass('background_jobs') IS NOT NULL AS ok`);
  if (!rows[0].ok) throw new Error('plain-sql runs on nestjs-pg-queue\'s background_jobs table: run the library\'s migrations on this database first');
}
