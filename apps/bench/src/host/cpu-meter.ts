import { readFileSync } from 'node:fs';

/** USER_HZ: /proc/stat counts in 1/100 s on every Linux build Node supports. */
const TICKS_PER_SECOND = 100;

/**
 * CPU time the whole machine spent busy (every state but idle and iowait), in milliseconds, from /proc/stat.
 * The difference of two readings is the CPU a scenario cost: the system under test and its PostgreSQL
 * backends, which run in other processes. On a shared 2-core machine, throughput swings ±20% from run to run
 * as other work comes and goes; CPU per job swings far less, so it shows a change of a few per cent that
 * throughput alone cannot. Undefined where /proc/stat does not exist (not Linux).
 */
export function machineBusyMs(): number | undefined {
  let line: string;
  try {
    line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0];
  } catch {
    return undefined;
  }
  // cpu user nice system idle iowait irq softirq steal guest guest_nice (guest time is already inside user)
  const [user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number);
  return ((user + nice + system + irq + softirq + steal) * 1000) / TICKS_PER_SECOND;
}
