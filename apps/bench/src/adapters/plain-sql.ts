import pg from 'pg';
import { QUEUE, type Adapter, type AdapterOptions, type BenchPayload, type RunningSystem } from './types.js';

/**
 * The reference: the seed's table and claim query in a hand-written loop, with nothing a library adds
 * (no leases, heartbeats, fencing, retries, timeouts, graceful drain, maintenance). It shows what the
 * hardware and PostgreSQL allow for this workload; a library within 90% of it spends little on its
 * guarantees.
 */
export const PLAIN_SCHEMA = `
  DO $$ BEGIN
    CREATE TYPE background_job_status AS ENUM ('queued', 'processing', 'failed', 'completed');
  EXCEPTION WHEN duplicate_object THEN NULL; END $$;
  CREATE TABLE IF NOT EXISTS background_jobs (
    id           bigserial PRIMARY KEY,
    queue_name   text NOT NULL,
    payload      jsonb NOT NULL DEFAULT '{}',
    status       background_job_status NOT NULL DEFAULT 'queued',
    locked_at    timestamptz,
    run_at       timestamptz NOT NULL DEFAULT now(),
    attempts     integer NOT NULL DEFAULT 0,
    max_attempts integer NOT NULL DEFAULT 5,
    last_error   text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
  );
  CREATE INDEX IF NOT EXISTS background_jobs_queued_idx ON background_jobs (queue_name, run_at) WHERE status = 'queued';
  CREATE OR REPLACE FUNCTION background_jobs_notify() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    PERFORM pg_notify('plain_jobs', q.queue_name) FROM (SELECT DISTINCT queue_name FROM new_jobs) AS q;
    RETURN NULL;
  END $$;
  DROP TRIGGER IF EXISTS background_jobs_notify ON background_jobs;
  CREATE TRIGGER background_jobs_notify AFTER INSERT ON background_jobs
    REFERENCING NEW TABLE AS new_jobs FOR EACH STATEMENT EXECUTE FUNCTION background_jobs_notify();`;

// The seed's claim: one autocommit statement locks and marks a batch; SKIP LOCKED keeps loops apart.
const CLAIM = `
  UPDATE background_jobs SET status = 'processing', locked_at = now(), attempts = attempts + 1, updated_at = now()
  WHERE id IN (
    SELECT id FROM background_jobs
    WHERE queue_name = $1 AND status = 'queued' AND run_at <= now()
    ORDER BY run_at LIMIT $2
    FOR UPDATE SKIP LOCKED)
  RETURNING id, payload`;
const COMPLETE = `UPDATE background_jobs SET status = 'completed', updated_at = now() WHERE id = ANY($1::int8[])`;
const INSERT_ONE = `INSERT INTO background_jobs (queue_name, payload) VALUES ($1, $2::jsonb)`;
const INSERT_MANY = `INSERT INTO background_jobs (queue_name, payload) SELECT $1, p FROM unnest($2::jsonb[]) AS p`;

/** An idle loop polls this often in case a NOTIFY was missed (the LISTEN connection does the real waking). */
const POLL_MS = 1_000;

/**
 * How the plain loop spends `concurrency`: `loops` claim loops of `batch` jobs each (claim, run the batch,
 * complete it, repeat), one loop per 25 jobs. Measured here on 20,000 no-op jobs: c=10: 1x10 6,112/s vs
 * 2x5 5,459/s; c=50: 2x25 15,552/s vs 1x50 12,274/s vs 5x10 10,804/s. Bigger batches mean fewer commits;
 * a second loop lets one loop's claim overlap the other's completion.
 */
export function plainShape(concurrency: number): { loops: number; batch: number } {
  const override = process.env.BENCH_PLAIN_SHAPE; // "loops x batch", for re-tuning only
  if (override) {
    const [loops, batch] = override.split('x').map(Number);
    return { loops, batch };
  }
  const loops = Math.max(1, Math.round(concurrency / 25));
  return { loops, batch: Math.max(1, Math.floor(concurrency / loops)) };
}

export const plainSqlAdapter: Adapter = {
  async start(options: AdapterOptions): Promise<RunningSystem> {
    const pool = new pg.Pool({ connectionString: options.url, max: options.poolSize, application_name: `bench plain-sql ${options.role}` });
    pool.on('error', (error) => console.error(`[plain-sql pool] ${error.message}`));
    await createSchema(pool);
    let stopping = false;
    let listener: pg.Client | undefined;
    const loops: Promise<void>[] = [];
    let notified = 0;
    let wake: () => void = () => {};
    let woken = new Promise<void>((resolve) => (wake = resolve));
    const signal = () => {
      notified++;
      const resolve = wake;
      woken = new Promise<void>((r) => (wake = r));
      resolve();
    };
    if (options.role === 'worker') {
      listener = new pg.Client({ connectionString: options.url, application_name: 'bench plain-sql listener' });
      await listener.connect();
      listener.on('notification', signal);
      await listener.query('LISTEN plain_jobs');
      const { loops: count, batch } = plainShape(options.concurrency);
      const loop = async () => {
        while (!stopping) {
          const seen = notified;
          const { rows } = await pool.query<{ id: string; payload: BenchPayload }>({ name: 'claim', text: CLAIM, values: [QUEUE, batch] });
          if (rows.length === 0) {
            if (seen === notified) await Promise.race([woken, sleep(POLL_MS)]);
            continue;
          }
          await Promise.all(rows.map(async (row) => options.onJob(row.payload)));
          await pool.query({ name: 'complete', text: COMPLETE, values: [rows.map((r) => r.id)] });
        }
      };
      for (let i = 0; i < count; i++) loops.push(loop());
    }
    return {
      enqueue: async (payload) => void (await pool.query({ name: 'insert_one', text: INSERT_ONE, values: [QUEUE, JSON.stringify(payload)] })),
      enqueueMany: async (payloads) =>
        void (await pool.query({ name: 'insert_many', text: INSERT_MANY, values: [QUEUE, payloads.map((p) => JSON.stringify(p))] })),
      stop: async () => {
        stopping = true;
        signal();
        await Promise.all(loops);
        await listener?.end();
        await pool.end();
      },
    };
  },
};

/** Children of a scale-out run start together: the advisory lock makes the DDL run once. */
async function createSchema(pool: pg.Pool): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock(4242)');
    await client.query(PLAIN_SCHEMA);
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
