import { fork, type ChildProcess } from 'node:child_process';
import type pg from 'pg';
import type { LimitsWorkerConfig } from './limits-worker.js';

/** A forked limits-worker.js, booted. */
export interface LimitsWorker {
  workerId: string;
  child: ChildProcess;
  exited: Promise<void>;
}

/** Forks and boots `limits-worker.js` processes; SIGKILLs them and records each kill (database clock) in limit_kills. */
export class LimitsFleet {
  readonly live: LimitsWorker[] = [];
  private started = 0;

  constructor(
    private readonly script: string,
    private readonly url: string,
    private readonly queue: LimitsWorkerConfig['queue'],
  ) {}

  async start(count: number): Promise<LimitsWorker[]> {
    return Promise.all(Array.from({ length: count }, () => this.startOne()));
  }

  async startOne(): Promise<LimitsWorker> {
    const env: NodeJS.ProcessEnv = { ...process.env };
    delete env.NODE_OPTIONS; // Jest's --experimental-vm-modules is not for the workers
    const child = fork(this.script, [], { env, stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
    const worker: LimitsWorker = { workerId: `w${++this.started}`, child, exited: new Promise((resolve) => child.once('exit', () => resolve())) };
    const next = () =>
      new Promise<string>((resolve, reject) => {
        const onExit = (code: number | null) => reject(new Error(`limits worker exited (${code}): ${stderr}`));
        child.once('exit', onExit);
        child.once('message', (m: { type: string }) => {
          child.off('exit', onExit);
          resolve(m.type);
        });
      });
    await next(); // loaded
    const ready = next();
    const config: LimitsWorkerConfig = { url: this.url, workerId: worker.workerId, queue: this.queue };
    child.send({ type: 'start', config });
    await ready;
    this.live.push(worker);
    return worker;
  }

  /** SIGKILL, then the kill's time by the database clock: an upper bound of the end of whatever the process ran. */
  async kill(worker: LimitsWorker, db: pg.Pool): Promise<void> {
    this.live.splice(this.live.indexOf(worker), 1);
    worker.child.kill('SIGKILL');
    await worker.exited;
    await db.query(`INSERT INTO limit_kills (worker, killed_at) VALUES ($1, clock_timestamp())`, [worker.workerId]);
  }

  /** SIGSTOP: the process keeps its connections but runs nothing, not even its heartbeat. */
  freeze(worker: LimitsWorker): void {
    worker.child.kill('SIGSTOP');
  }

  resume(worker: LimitsWorker): void {
    worker.child.kill('SIGCONT');
  }

  async killAll(): Promise<void> {
    const all = this.live.splice(0);
    for (const w of all) {
      w.child.kill('SIGCONT'); // a stopped process keeps SIGKILL pending
      w.child.kill('SIGKILL');
    }
    await Promise.all(all.map((w) => w.exited));
  }
}

export const LIMIT_TABLES = `
  CREATE TABLE limit_runs (
    id bigserial PRIMARY KEY, job_id int8 NOT NULL, queue text NOT NULL, attempt int NOT NULL, worker text NOT NULL, pid int NOT NULL,
    concurrency_key text, claimed_at timestamptz NOT NULL, marked_at timestamptz NOT NULL, started_at timestamptz NOT NULL, ended_at timestamptz,
    call_no int);
  CREATE TABLE limit_kills (worker text PRIMARY KEY, killed_at timestamptz NOT NULL);`;

/**
 * Samples the number of `processing` rows of a queue every few milliseconds until stopped; resolves with the
 * highest seen. The slots the limit counts, read from the database while the scenario runs.
 */
export function sampleRunning(db: pg.Pool, queue: string): { stop: () => Promise<number> } {
  let stopped = false;
  let most = 0;
  const loop = (async () => {
    while (!stopped) {
      const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = $1 AND status = 'processing'`, [queue]);
      most = Math.max(most, rows[0].n);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await loop;
      return most;
    },
  };
}

/**
 * The most runs in progress at one instant, per group (a group: a queue, or a concurrency key). A run ends at
 * its recorded end, or, when its process was killed first, at the kill (the run cannot have gone on past it).
 */
export async function maxOverlap(db: pg.Pool, queue: string, perKey = false): Promise<Map<string, number>> {
  const { rows } = await db.query<{ grp: string; n: number }>(
    `WITH runs AS (
       SELECT CASE WHEN $2 THEN r.concurrency_key ELSE r.queue END AS grp, r.started_at, coalesce(r.ended_at, k.killed_at) AS ended_at
       FROM limit_runs AS r LEFT JOIN limit_kills AS k ON k.worker = r.worker WHERE r.queue = $1
     ), events AS (
       SELECT grp, started_at AS at, 1 AS delta FROM runs UNION ALL SELECT grp, ended_at, -1 FROM runs
     )
     SELECT grp, max(running)::int AS n FROM (
       -- at one instant, ends count before starts: a slot freed and taken again is not an overlap
       SELECT grp, sum(delta) OVER (PARTITION BY grp ORDER BY at, delta ROWS UNBOUNDED PRECEDING) AS running FROM events
     ) AS s GROUP BY grp`,
    [queue, perKey],
  );
  return new Map(rows.map((r) => [r.grp, r.n]));
}
