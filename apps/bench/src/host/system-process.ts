import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { BASELINE_ID, type BenchLimits, type HandlerMode, type SystemId } from '../adapters/types.js';
import { withClient } from '../db/sql.js';
import type { Command, Envelope, FeedResult, FlowReport, HostStats, MemoryStats, Reply, TimedResult } from './protocol.js';

const HOST = fileURLToPath(new URL('./worker-host.js', import.meta.url));

/** The baseline checkout's built host (`--baseline <dir>`); its own node_modules supply its library. */
function hostOf(system: SystemId): string {
  if (system !== BASELINE_ID) return HOST;
  const dir = process.env.BENCH_BASELINE_DIR;
  if (!dir) throw new Error(`${BASELINE_ID} needs --baseline <checkout with a built apps/bench>`);
  return join(dir, 'apps/bench/dist/host/worker-host.js');
}

/** Every child ever started, so that an interrupted run can kill them all by pid. */
const live = new Set<ChildProcess>();
export function killAllChildren(): void {
  for (const child of live) if (child.pid !== undefined && child.exitCode === null) child.kill('SIGKILL');
}

export interface StartOptions {
  system: SystemId;
  url: string;
  role: 'worker' | 'producer';
  concurrency: number;
  poolSize: number;
  marks?: number[];
  limits?: BenchLimits;
  /** Milliseconds each handler call takes (0 or absent: no-op jobs). */
  jobMs?: number;
  /** The flows scenario: the handler runs flow jobs and reports their ends. */
  flows?: boolean;
  /** The modes scenario: batches, durable steps or transactional handlers. */
  mode?: HandlerMode;
  /** Node flags of the child besides BENCH_CHILD_ARGS (the memory scenario: --expose-gc). Not sent to the child's start. */
  execArgv?: string[];
}

/** The plain loop runs on nestjs-pg-queue's table: a producer of the library creates it (its migrations) and leaves. */
async function prepareSchema(options: StartOptions): Promise<void> {
  if (options.system !== 'plain-sql') return;
  const ready = await withClient(options.url, async (c) => (await c.query<{ ok: boolean }>(`SELECT to_regclass('background_jobs') IS NOT NULL AS ok`)).rows[0].ok);
  if (ready) return;
  const setup = await SystemProcess.start({ system: 'pg-queue', url: options.url, role: 'producer', concurrency: 1, poolSize: 2 });
  await setup.stop();
}

/** The parent's handle on one child process hosting one system. */
export class SystemProcess {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private exited = false;

  private constructor(
    private readonly child: ChildProcess,
    readonly system: SystemId,
  ) {
    child.on('message', (message: Reply) => {
      const waiter = this.pending.get(message.id);
      if (!waiter) return;
      this.pending.delete(message.id);
      if (message.ok) waiter.resolve(message.result);
      else waiter.reject(new Error(`${system}: ${message.error}`));
    });
    child.on('exit', (code, signal) => {
      this.exited = true;
      live.delete(child);
      for (const waiter of this.pending.values()) waiter.reject(new Error(`${system} child exited (code ${code}, signal ${signal})`));
      this.pending.clear();
    });
  }

  static async start(options: StartOptions): Promise<SystemProcess> {
    await prepareSchema(options);
    // BENCH_CHILD_ARGS: node flags for the system processes, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" to profile one.
    const { execArgv = [], ...start } = options;
    const flags = [...(process.env.BENCH_CHILD_ARGS ? process.env.BENCH_CHILD_ARGS.split(' ') : []), ...execArgv];
    const child = fork(hostOf(options.system), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: flags.length > 0 ? flags : undefined });
    live.add(child);
    const proc = new SystemProcess(child, options.system);
    try {
      await proc.send({ cmd: 'start', ...start, system: options.system === BASELINE_ID ? 'pg-queue' : options.system });
    } catch (error) {
      child.kill('SIGKILL');
      throw error;
    }
    return proc;
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  send(command: Extract<Command, { cmd: 'start' }>): Promise<HostStats>;
  send(command: Extract<Command, { cmd: 'enqueue-sequential' | 'enqueue-concurrent' | 'enqueue-bulk' | 'enqueue-keyed' | 'enqueue-flows' }>): Promise<TimedResult>;
  send(command: Extract<Command, { cmd: 'flow-report' }>): Promise<FlowReport>;
  send(command: Extract<Command, { cmd: 'latency' | 'latency-samples' }>): Promise<number[]>;
  send(command: Extract<Command, { cmd: 'enqueue-stamped' }>): Promise<number>;
  send(command: Extract<Command, { cmd: 'feed' }>): Promise<FeedResult>;
  send(command: Extract<Command, { cmd: 'stats' | 'stop' }>): Promise<HostStats>;
  send(command: Extract<Command, { cmd: 'memory' }>): Promise<MemoryStats>;
  send(command: Command): Promise<unknown> {
    if (this.exited) return Promise.reject(new Error(`${this.system} child is gone`));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.child.send({ ...command, id } satisfies Envelope);
    });
  }

  stats(): Promise<HostStats> {
    return this.send({ cmd: 'stats' });
  }

  /** Graceful stop; a child that does not stop within the timeout is killed. */
  async stop(timeoutMs = 30_000): Promise<HostStats | undefined> {
    if (this.exited) return undefined;
    let timer: NodeJS.Timeout | undefined;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    try {
      const stats = await Promise.race([
        this.send({ cmd: 'stop' }),
        new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${this.system} did not stop in ${timeoutMs} ms`)), timeoutMs))),
      ]);
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5_000))]);
      return stats;
    } catch (error) {
      console.error(String(error));
      return undefined;
    } finally {
      clearTimeout(timer);
      if (!this.exited) this.child.kill('SIGKILL');
    }
  }
}
