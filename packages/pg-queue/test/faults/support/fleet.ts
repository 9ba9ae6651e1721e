import { fork, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type pg from 'pg';
import type { WorkerProcessConfig } from './worker-process.js';

export interface WorkerHandle {
  workerId: string;
  pid: number;
  child: ChildProcess;
  logFile: string;
  ready: boolean;
  stopped: boolean;
  exited: Promise<void>;
}

export interface FleetOptions {
  script: string;
  url: string;
  logDir: string;
  /** Records kills and freezes (fault_faults) with the database clock. */
  db: pg.Pool;
  queue: WorkerProcessConfig['queue'];
  poolSize?: number;
  bootTimeoutMs?: number;
}

/**
 * Worker processes of one scenario: starts them (forked, each a Nest app), and injects process faults
 * (SIGKILL, SIGSTOP/SIGCONT). Every fault is written to fault_faults with clock_timestamp(), so that the
 * analysis compares it with the runs on the same clock.
 */
export class WorkerFleet {
  readonly live = new Map<string, WorkerHandle>();
  private generation = 0;

  constructor(private readonly options: FleetOptions) {}

  /** Starts a worker `<slot>.<n>` and resolves once its Nest app has booted. */
  async start(slot: string): Promise<WorkerHandle> {
    const workerId = `${slot}.${++this.generation}`;
    const logFile = join(this.options.logDir, `${workerId}.log`);
    const config: WorkerProcessConfig = {
      url: this.options.url,
      workerId,
      queue: this.options.queue,
      poolSize: this.options.poolSize ?? 6,
      logLevels: ['log', 'warn', 'error'],
    };
    const fd = openSync(logFile, 'a');
    const env: NodeJS.ProcessEnv = { ...process.env, FAULT_WORKER_CONFIG: JSON.stringify(config) };
    delete env.NODE_OPTIONS; // Jest's --experimental-vm-modules is not for the workers
    const child = fork(this.options.script, [], { env, execArgv: ['--enable-source-maps'], stdio: ['ignore', fd, fd, 'ipc'] });
    closeSync(fd);
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const handle: WorkerHandle = { workerId, pid: child.pid!, child, logFile, ready: false, stopped: false, exited };
    this.live.set(workerId, handle);
    const timeoutMs = this.options.bootTimeoutMs ?? 60_000;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`worker ${workerId} did not boot in ${timeoutMs} ms:\n${this.logTail(handle)}`)), timeoutMs);
      child.once('message', () => {
        clearTimeout(timer);
        resolve();
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`worker ${workerId} exited during boot (${signal ?? code}):\n${this.logTail(handle)}`));
      });
    });
    handle.ready = true;
    return handle;
  }

  ready(): WorkerHandle[] {
    return [...this.live.values()].filter((w) => w.ready && !w.stopped);
  }

  /** SIGKILL: no shutdown hook, no outcome written, no lease released. Resolves when the process is gone. */
  async kill(worker: WorkerHandle): Promise<void> {
    this.live.delete(worker.workerId);
    worker.child.kill('SIGKILL');
    await worker.exited;
    await this.record(worker, 'SIGKILL');
  }

  /** SIGSTOP: the process keeps its connections but runs nothing, not even its heartbeat. */
  async freeze(worker: WorkerHandle): Promise<void> {
    worker.stopped = true;
    worker.child.kill('SIGSTOP');
    await this.record(worker, 'SIGSTOP');
  }

  async resume(worker: WorkerHandle): Promise<void> {
    await this.record(worker, 'SIGCONT');
    worker.child.kill('SIGCONT');
    worker.stopped = false;
  }

  /** Ends every worker at once (frozen ones too: SIGCONT first, else a stopped process keeps its SIGKILL pending). */
  async killAll(): Promise<void> {
    const all = [...this.live.values()];
    this.live.clear();
    for (const w of all) {
      if (w.child.exitCode === null && w.child.signalCode === null) {
        w.child.kill('SIGCONT');
        w.child.kill('SIGKILL');
      }
    }
    await Promise.all(all.map((w) => w.exited));
  }

  logTail(worker: Pick<WorkerHandle, 'logFile'>, lines = 30): string {
    try {
      return readFileSync(worker.logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
    } catch {
      return '(no log)';
    }
  }

  log(worker: Pick<WorkerHandle, 'logFile'>): string {
    try {
      return readFileSync(worker.logFile, 'utf8');
    } catch {
      return '';
    }
  }

  private async record(worker: WorkerHandle, signal: string): Promise<void> {
    await this.options.db.query('INSERT INTO fault_faults (worker, pid, signal) VALUES ($1, $2, $3)', [worker.workerId, worker.pid, signal]);
  }
}
