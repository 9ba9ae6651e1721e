// --pin: PostgreSQL on one half of the machine's cores, the benchmark's Node processes on the other. On two
// shared cores a cell's figure swings by 10-30% with whatever the scheduler does to the server and the worker
// in that second; apart, each side has a core of its own, and a before/after of a few percent becomes visible.
// Pinned figures are not the unpinned ones (each side gets at most its half): compare pinned with pinned.
import { execFileSync } from 'node:child_process';
import { cpus } from 'node:os';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Pinning {
  /** CPU list given to PostgreSQL (the postmaster, its running children, and every backend forked later). */
  server: string;
  /** CPU list of this process and so of every process it forks (the systems' workers and producers). */
  node: string;
}

/** Splits the cores in two halves; refuses a machine of one core, or one without taskset (util-linux). */
export function planPinning(): Pinning {
  const n = cpus().length;
  if (n < 2) throw new Error(`--pin needs at least 2 cores (this machine has ${n})`);
  const half = Math.floor(n / 2);
  const list = (from: number, to: number) => (from === to ? `${from}` : `${from}-${to}`);
  return { server: list(0, half - 1), node: list(half, n - 1) };
}

/**
 * Pins the server whose data folder is `dataDir`: its postmaster and the processes it has forked so far (the
 * checkpointer, the WAL writer...). Backends forked later inherit the postmaster's affinity.
 */
export function pinServer(dataDir: string, cpuList: string): number[] {
  const pidFile = join(dataDir, 'postmaster.pid');
  if (!existsSync(pidFile)) throw new Error(`--pin: no ${pidFile}; pinning needs the server the benchmark starts itself`);
  const postmaster = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  const pids = [postmaster, ...descendants(postmaster)];
  for (const pid of pids) taskset(cpuList, pid);
  return pids;
}

/** Pins this process (all its threads); the processes it forks from now on inherit it. */
export function pinSelf(cpuList: string): void {
  taskset(cpuList, process.pid);
}

function taskset(cpuList: string, pid: number): void {
  try {
    execFileSync('taskset', ['-a', '-c', '-p', cpuList, String(pid)], { stdio: 'ignore' });
  } catch (error) {
    throw new Error(`--pin: taskset -a -c -p ${cpuList} ${pid} failed (${(error as Error).message}); taskset comes with util-linux`);
  }
}

function descendants(pid: number): number[] {
  const out: number[] = [];
  const file = `/proc/${pid}/task/${pid}/children`;
  if (!existsSync(file)) return out;
  for (const child of readFileSync(file, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number)) out.push(child, ...descendants(child));
  return out;
}
