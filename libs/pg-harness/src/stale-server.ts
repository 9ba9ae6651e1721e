import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { PostgresSetupError } from './run-as-postgres.js';

/** The data folder's server belongs to another running process (its app is alive): not stale, not ours to stop. */
export class DataDirInUseError extends PostgresSetupError {
  constructor(
    /** The server's postmaster. */
    readonly pid: number,
    /** The running process that started it. */
    readonly ownerPid: number,
    /** The TCP port it listens on (postmaster.pid's fourth line); undefined when unreadable. */
    readonly port: number | undefined,
    databaseDir: string,
  ) {
    super(`PostgreSQL (pid ${pid}) of another running process (pid ${ownerPid}) is using ${databaseDir}: stop that process first, or use another data folder.`);
  }
}

/**
 * A kept data folder can still have its server running when the process that started it was killed with
 * SIGKILL (it has no chance to stop it): the next start then fails on postmaster.pid. Such an orphan (a
 * postgres of this very folder whose parent is no longer a Node process) is stopped here; a server whose
 * Node parent is still alive belongs to a running app, and the start fails with one line saying so.
 */
export async function stopStaleServer(databaseDir: string, log?: (message: string) => void): Promise<void> {
  const lock = readText(join(databaseDir, 'postmaster.pid'));
  if (lock === undefined) return;
  const [pidLine, dirLine, , portLine] = lock.split('\n');
  const pid = Number(pidLine);
  if (!Number.isInteger(pid) || pid <= 0 || resolve(dirLine ?? '') !== resolve(databaseDir) || !isPostgres(pid)) return; // gone: PostgreSQL clears a dead one's lock itself
  const parent = parentOf(pid);
  if (parent !== undefined && parent > 1 && /(^|\/)node$/.test(commandOf(parent) ?? '')) {
    const port = Number(portLine);
    throw new DataDirInUseError(pid, parent, Number.isInteger(port) && port > 0 ? port : undefined, databaseDir);
  }
  log?.(`stopping PostgreSQL (pid ${pid}) left running on ${databaseDir} by an earlier run that was killed`);
  process.kill(pid, 'SIGINT'); // fast shutdown: sessions end, data stays consistent
  const deadline = Date.now() + 30_000;
  while (isPostgres(pid)) {
    if (Date.now() > deadline) throw new PostgresSetupError(`PostgreSQL (pid ${pid}) on ${databaseDir} did not stop within 30 s; stop it (kill ${pid}) and start again.`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/** The program name of a live process (Linux /proc); undefined when it is gone or not visible. */
function commandOf(pid: number): string | undefined {
  return readText(`/proc/${pid}/cmdline`)?.split('\0')[0];
}

function isPostgres(pid: number): boolean {
  const stat = readText(`/proc/${pid}/stat`);
  // A zombie (state Z) has exited already; only its exit status is left for its parent to collect.
  if (stat === undefined || /\) Z /.test(stat)) return false;
  return /(^|\/)postgres$/.test(commandOf(pid) ?? '');
}

function parentOf(pid: number): number | undefined {
  const stat = readText(`/proc/${pid}/stat`);
  const fields = stat?.slice(stat.lastIndexOf(')') + 2).split(' ');
  return fields ? Number(fields[1]) : undefined;
}
