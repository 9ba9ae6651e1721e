import { fork, type ChildProcess } from 'node:child_process';
import type pg from 'pg';
import type { ReadAheadWorkerConfig } from './read-ahead-worker.js';

/** The suite's tables: every handler start (ra_runs) and the workers' own events (ra_events). */
export const READ_AHEAD_TABLES = `
  CREATE TABLE ra_runs (
    id bigserial PRIMARY KEY, job_id int8 NOT NULL, attempt int NOT NULL, worker text NOT NULL, payload jsonb NOT NULL, row_locked_by text,
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(), ended_at timestamptz);
  CREATE TABLE ra_events (worker text NOT NULL, event text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());`;

/** A forked read-ahead-worker.js: loaded at first, a worker once started. */
export interface ReadAheadWorker {
  workerId: string;
  child: ChildProcess;
  exited: Promise<void>;
  loaded: Promise<void>;
  stderr: () => string;
}

/**
 * Forks read-ahead-worker.js processes ahead of need (loading Nest is most of a cold start), starts them with
 * a config, and injects faults: SIGKILL, SIGSTOP/SIGCONT. Asks a started worker to pause its queue or to close.
 */
export class ReadAheadFleet {
  private readonly all = new Set<ReadAheadWorker>();
  private spares: ReadAheadWorker[] = [];
  private started = 0;

  constructor(private readonly script: string) {}

  /** Forks `count` processes now, so that they load while the test prepares. */
  warm(count: number): void {
    while (this.spares.length < count) this.spares.push(this.fork());
  }

  private fork(): ReadAheadWorker {
    const env: NodeJS.ProcessEnv = { ...process.env };
    delete env.NODE_OPTIONS; // Jest's --experimental-vm-modules is not for the workers
    const child = fork(this.script, [], { env, stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
    const worker: ReadAheadWorker = {
      workerId: '(spare)',
      child,
      stderr: () => stderr,
      exited: new Promise((resolve) => child.once('exit', () => resolve())),
      loaded: new Promise<void>((resolve, reject) => {
        child.once('message', () => resolve());
        child.once('exit', (code) => reject(new Error(`read-ahead worker exited while loading (${code}): ${stderr}`)));
      }),
    };
    worker.loaded.catch(() => undefined);
    this.all.add(worker);
    void worker.exited.then(() => this.all.delete(worker));
    return worker;
  }

  /** Starts a worker with these options (`url`: its queue connection; runs are recorded on `recordsUrl`). */
  async start(workerId: string, url: string, recordsUrl: string, queue: ReadAheadWorkerConfig['queue']): Promise<ReadAheadWorker> {
    const worker = this.spares.shift() ?? this.fork();
    worker.workerId = workerId;
    this.started += 1;
    await worker.loaded;
    const config: ReadAheadWorkerConfig = { url, recordsUrl, workerId, queue };
    await new Promise<void>((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`read-ahead worker ${workerId} exited during boot (${code}): ${worker.stderr()}`));
      worker.child.once('exit', onExit);
      worker.child.once('message', () => {
        worker.child.off('exit', onExit);
        resolve();
      });
      worker.child.send({ type: 'start', config });
    });
    return worker;
  }

  /** QueueService.pause('q') inside the worker's process; resolves with the handlers called before it returned, and the database clock just after. */
  pause(worker: ReadAheadWorker): Promise<{ startsBefore: number; at: string }> {
    return this.ask<{ startsBefore: number; at: string }>(worker, 'pause', 'paused');
  }

  /** app.close() inside the worker's process (the start is recorded in ra_events first); resolves once it returned. */
  async close(worker: ReadAheadWorker): Promise<void> {
    await this.ask(worker, 'close', 'closed');
  }

  private ask<T>(worker: ReadAheadWorker, type: string, answer: string): Promise<T> {
    return new Promise<T>((resolve) => {
      const onMessage = (m: { type: string } & T) => {
        if (m.type !== answer) return;
        worker.child.off('message', onMessage);
        resolve(m);
      };
      worker.child.on('message', onMessage);
      worker.child.send({ type });
    });
  }

  /** SIGKILL; resolves with the database clock once the process is gone. */
  async kill(worker: ReadAheadWorker, db: pg.Pool): Promise<string> {
    worker.child.kill('SIGKILL');
    await worker.exited;
    return dbNow(db);
  }

  /** SIGSTOP: the process keeps its connections but runs nothing; resolves with the database clock just after. */
  async freeze(worker: ReadAheadWorker, db: pg.Pool): Promise<string> {
    worker.child.kill('SIGSTOP');
    return dbNow(db);
  }

  resume(worker: ReadAheadWorker): void {
    worker.child.kill('SIGCONT');
  }

  async killAll(): Promise<void> {
    const all = [...this.all];
    this.spares = [];
    for (const w of all) {
      if (w.child.exitCode !== null || w.child.signalCode !== null) continue;
      w.child.kill('SIGCONT'); // a stopped process keeps SIGKILL pending
      w.child.kill('SIGKILL');
    }
    await Promise.all(all.map((w) => w.exited));
  }
}

export async function dbNow(db: pg.Pool): Promise<string> {
  const { rows } = await db.query<{ at: string }>(`SELECT clock_timestamp()::text AS at`);
  return rows[0].at;
}
