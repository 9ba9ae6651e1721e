import { execFileSync } from 'node:child_process';
import { cpus, loadavg, release, totalmem, type } from 'node:os';

export interface MachineInfo {
  cpu: string;
  cores: number;
  memoryGB: number;
  os: string;
  node: string;
  gitCommit: string;
  /** 1-minute load average when the run started: above the core count, something else was competing for CPU. */
  loadAtStart: number;
}

export function machineInfo(): MachineInfo {
  const cpu = cpus();
  return {
    cpu: cpu[0]?.model.trim() ?? 'unknown',
    cores: cpu.length,
    memoryGB: Math.round((totalmem() / 1024 ** 3) * 10) / 10,
    os: `${type()} ${release()}`,
    node: process.version,
    gitCommit: gitDescribe(),
    loadAtStart: Math.round(loadavg()[0] * 100) / 100,
  };
}

/** The commit measured, marked dirty when the working tree had changes (the figures are of the tree, not the commit). */
function gitDescribe(): string {
  try {
    return execFileSync('git', ['describe', '--always', '--dirty', '--abbrev=12'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return 'unknown';
  }
}
