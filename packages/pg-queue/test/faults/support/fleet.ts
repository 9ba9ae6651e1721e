import { fork, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type pg from 'pg';
import { StallWatch, type Stall } from './stall-watch.js';
import type { WorkerProcessConfig } from './worker-process.js';

/** A forked worker-process.js: loading its code at first, then (once started) a worker. */
export interface WorkerHandle {
  workerId: string;
  pid: number;
  child: ChildProcess;
  logFile: string;
  ready: boolean;
  stopped: boolean;
  loaded: Promise<void>;
  exited: Promise<void>;
  /** While frozen: what the SIGSTOP found (see WorkerFleet.resume). */
  frozenWith?: { claimed: Set<string>; started: Set<string>; startsLines: number };
}

/**
 * Forks worker processes ahead of need. A cold start is mostly loading Nest and TypeORM (1.5 s for one
 * process, about 5 s for four at once on a loaded 2-core machine): replacing a worker killed every second
 * with a cold process would leave the fleet booting most of the time. Each replacement is still a new OS
 * process with nothing of the old one; it has only read its code already, as a warm spare would.
 */
export class ProcessPool {
  private forks = 0;
  private readonly spares: WorkerHandle[] = [];
  private readonly all = new Set<WorkerHandle>();

  constructor(
    private readonly script: string,
    private readonly logDir: string,
    private readonly spareCount: number,
  ) {}

  /** Forks the spares now, so that they load while the caller prepares. */
  warm(): void {
    while (this.spares.length < this.spareCount) this.spares.push(this.fork());
  }

  take(): WorkerHandle {
    const handle = this.spares.shift() ?? this.fork();
    this.warm();
    return handle;
  }

  /** Ends every process, spares and frozen ones too (SIGCONT first: a stopped process keeps SIGKILL pending). */
  async killAll(): Promise<void> {
    const all = [...this.all];
    this.spares.length = 0;
    for (const w of all) killNow(w);
    await Promise.all(all.map((w) => w.exited));
  }

  private fork(): WorkerHandle {
    const env: NodeJS.ProcessEnv = { ...process.env };
    delete env.NODE_OPTIONS; // Jest's --experimental-vm-modules is not for the workers
    const logFile = join(this.logDir, `process-${++this.forks}.log`);
    const fd = openSync(logFile, 'a');
    const child = fork(this.script, [], { env, execArgv: ['--enable-source-maps'], stdio: ['ignore', fd, fd, 'ipc'] });
    closeSync(fd);
    const handle: WorkerHandle = {
      workerId: '(spare)',
      pid: child.pid!,
      child,
      logFile,
      ready: false,
      stopped: false,
      loaded: new Promise<void>((resolve, reject) => {
        child.once('message', () => resolve());
        child.once('exit', (code, signal) => reject(new Error(`worker process exited while loading (${signal ?? code}):\n${logTail(logFile)}`)));
      }),
      exited: new Promise<void>((resolve) => child.once('exit', () => resolve())),
    };
    handle.loaded.catch(() => undefined); // reported to whoever takes this process
    this.all.add(handle);
    void handle.exited.then(() => this.all.delete(handle));
    return handle;
  }
}

export interface FleetOptions {
  processes: ProcessPool;
  url: string;
  /** The database itself, for the process's records, when `url` goes through a proxy the test breaks. */
  recordsUrl?: string;
  /** Where faults are recorded (fault_faults, fault_held). */
  db: pg.Pool;
  queue: WorkerProcessConfig['queue'];
  poolSize?: number;
  bootTimeoutMs?: number;
}

/**
 * The workers of one scenario: starts them (each a Nest app in its own process) and injects process faults
 * (SIGKILL, SIGSTOP/SIGCONT). Every fault is written to fault_faults (clock_timestamp()) and fault_held (the
 * jobs the worker held), which is what the audit explains double runs with.
 */
export class WorkerFleet {
  readonly live = new Map<string, WorkerHandle>();
  private generation = 0;
  /** Records a stall of the whole machine as a fault (stall-watch.ts); runs from the first start to killAll. */
  private readonly watch: StallWatch;
  private watching = false;

  constructor(private readonly options: FleetOptions) {
    this.watch = new StallWatch({
      db: options.db,
      leaseMs: options.queue.leaseMs ?? 30_000,
      starts: () => new Map([...this.live.values()].map((w) => [w.workerId, readStartLines(w)])),
    });
  }

  /** The stalls of the whole machine seen while this fleet ran, each recorded as a fault. */
  get stalls(): readonly Stall[] {
    return this.watch.stalls;
  }

  /** Starts a worker `<slot>.<n>` and resolves once its Nest app has booted. */
  async start(slot: string): Promise<WorkerHandle> {
    if (!this.watching) {
      this.watching = true;
      this.watch.start();
    }
    const handle = this.options.processes.take();
    handle.workerId = `${slot}.${++this.generation}`;
    this.live.set(handle.workerId, handle);
    await handle.loaded;
    const config: WorkerProcessConfig = {
      url: this.options.url,
      ...(this.options.recordsUrl ? { recordsUrl: this.options.recordsUrl } : {}),
      workerId: handle.workerId,
      queue: this.options.queue,
      poolSize: this.options.poolSize ?? 4,
      logLevels: ['log', 'warn', 'error'],
      startsFile: startsFile(handle),
    };
    const timeoutMs = this.options.bootTimeoutMs ?? 60_000;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`worker ${handle.workerId} did not boot in ${timeoutMs} ms:\n${logTail(handle.logFile)}`)), timeoutMs);
      const onExit = (code: number | null, signal: string | null) => {
        clearTimeout(timer);
        reject(new Error(`worker ${handle.workerId} exited during boot (${signal ?? code}):\n${logTail(handle.logFile)}`));
      };
      handle.child.once('exit', onExit);
      handle.child.once('message', () => {
        clearTimeout(timer);
        handle.child.off('exit', onExit);
        resolve();
      });
      handle.child.send({ type: 'start', config });
    });
    handle.ready = true;
    return handle;
  }

  /** Started and not frozen. */
  ready(): WorkerHandle[] {
    return [...this.live.values()].filter((w) => w.ready && !w.stopped);
  }

  /** SIGKILL: no shutdown hook, no outcome written, no lease released. Resolves, once the process is gone, with the number of jobs it held. */
  async kill(worker: WorkerHandle): Promise<number> {
    this.live.delete(worker.workerId);
    return this.inject(worker, 'SIGKILL', async () => {
      worker.child.kill('SIGKILL');
      await worker.exited;
    });
  }

  /** SIGSTOP: the process keeps its connections but runs nothing, not even its heartbeat. Resolves with the number of jobs it held. */
  async freeze(worker: WorkerHandle): Promise<number> {
    worker.stopped = true;
    return this.inject(worker, 'SIGSTOP', async () => void worker.child.kill('SIGSTOP'));
  }

  /**
   * SIGCONT, then one more job may count as held and started at the freeze: the one whose start the signal cut
   * in two. The worker checks a job's start deadline right before it calls the handler, and the handler's first
   * act writes the start; a SIGSTOP between the two leaves a job claimed and decided on but not yet in the starts
   * file, and it starts on SIGCONT. So the first start written after the resume counts when its job was held at
   * the freeze. Only that one: any other job held at the freeze that starts after it was started on a decision
   * taken before the freeze (a deadline compared with a stale clock), a defect the audit must see.
   */
  async resume(worker: WorkerHandle): Promise<void> {
    worker.child.kill('SIGCONT');
    worker.stopped = false;
    const frozen = worker.frozenWith;
    worker.frozenWith = undefined;
    if (!frozen) return;
    await new Promise((resolve) => setTimeout(resolve, 200)); // the cut start, if any, is written on the process's first turn
    const [first] = readStartLines(worker).slice(frozen.startsLines);
    if (!first) return;
    const [id, attempt] = first;
    if (frozen.claimed.has(id) && !frozen.started.has(id)) {
      await this.options.db.query(`INSERT INTO fault_held (worker, job_id, attempt) VALUES ($1, $2, $3)`, [worker.workerId, id, attempt]);
    }
  }

  async killAll(): Promise<void> {
    await this.watch.stop();
    const all = [...this.live.values()];
    this.live.clear();
    for (const w of all) killNow(w);
    await Promise.all(all.map((w) => w.exited));
  }

  log(worker: WorkerHandle): string {
    try {
      return readFileSync(worker.logFile, 'utf8');
    } catch {
      return '';
    }
  }

  /** The jobs claimed by a worker whose outcome is not written: running, finished but unwritten, or read ahead. */
  private async claimed(workerId: string): Promise<string[]> {
    const { rows } = await this.options.db.query<{ id: string }>(
      `SELECT id::text FROM background_jobs WHERE status = 'processing' AND locked_by = $1`,
      [workerId],
    );
    return rows.map((r) => r.id);
  }

  /**
   * Sends the signal and writes the fault down with the jobs the worker held *and had started*: claimed (read
   * just before and just after the signal: a job claimed in between is in the second read, and a job that is in
   * the first read only is harmless in the list) and started by its handler (the worker's starts file, written
   * synchronously at each start: a job only read ahead, never started, is not "in flight", and running it
   * elsewhere later is its first run). Resolves with the number of jobs held and started.
   */
  private async inject(worker: WorkerHandle, signal: 'SIGKILL' | 'SIGSTOP', send: () => Promise<void>): Promise<number> {
    const before = await this.claimed(worker.workerId);
    await send();
    if (signal === 'SIGSTOP') await new Promise((resolve) => setTimeout(resolve, 20)); // the signal is delivered
    const after = await this.claimed(worker.workerId);
    const lines = readStartLines(worker);
    const starts = new Map(lines);
    const claimed = new Set([...before, ...after]);
    const jobs = [...claimed].filter((id) => starts.has(id)).map((id) => ({ id, attempt: starts.get(id)! }));
    if (signal === 'SIGSTOP') worker.frozenWith = { claimed, started: new Set(jobs.map((j) => j.id)), startsLines: lines.length };
    await this.options.db.query(
      `WITH fault AS (INSERT INTO fault_faults (worker, pid, signal) VALUES ($1, $2, $3))
       INSERT INTO fault_held (worker, job_id, attempt) SELECT $1, * FROM unnest($4::int8[], $5::int[])`,
      [worker.workerId, worker.pid, signal, jobs.map((j) => j.id), jobs.map((j) => j.attempt)],
    );
    return jobs.length;
  }

  /**
   * A fault that hit every worker at once (PostgreSQL restarted): call once the server is back. Every start
   * every worker made before now counts as in flight at the fault (a job may start from a buffer during the
   * outage and its outcome be lost with it); a start after now does not.
   */
  async recordOutage(): Promise<void> {
    for (const worker of this.live.values()) {
      const starts = readStartLines(worker);
      await this.options.db.query(
        `WITH fault AS (INSERT INTO fault_faults (worker, pid, signal) VALUES ($1, $2, 'RESTART'))
         INSERT INTO fault_held (worker, job_id, attempt) SELECT $1, * FROM unnest($3::int8[], $4::int[])`,
        [worker.workerId, worker.pid, starts.map(([id]) => id), starts.map(([, attempt]) => attempt)],
      );
    }
  }
}

function startsFile(worker: WorkerHandle): string {
  return `${worker.logFile}.starts`;
}

/** What a worker process started, in the order it started them: [job id, attempt] pairs. */
function readStartLines(worker: WorkerHandle): [string, number][] {
  let text = '';
  try {
    text = readFileSync(startsFile(worker), 'utf8');
  } catch {
    // no start yet
  }
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [id, attempt] = line.split('/');
      return [id, Number(attempt)];
    });
}

function killNow(w: WorkerHandle): void {
  if (w.child.exitCode !== null || w.child.signalCode !== null) return;
  w.child.kill('SIGCONT');
  w.child.kill('SIGKILL');
}

function logTail(file: string, lines = 30): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}
