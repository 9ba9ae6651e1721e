import { afterAll, beforeAll } from '@jest/globals';
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { buildWorker, type WorkerBuild } from '../faults/support/build-worker.js';
import type { RecurringWorkerConfig } from './recurring-worker.js';

// The OS processes of the recurring specs (recurring-processes, recurring-every-processes): each runs
// recurring-worker.ts, built with the fault suite's build, loaded ahead (loading Nest is most of a cold start) and
// started with a config when the test wants it; SIGKILLed at will; every one left is killed after the suite.

export interface RecurringInstance {
  child: ChildProcess;
  /** Resolves when the process has loaded Nest and the library (its first message). */
  loaded: Promise<void>;
}

export interface RecurringProcesses {
  /** Forks a process that loads Nest and the library, to be started later. */
  spawn(): RecurringInstance;
  /** Starts a loaded process with `config`; resolves once its app is up. */
  start(instance: RecurringInstance, config: RecurringWorkerConfig): Promise<ChildProcess>;
  /** SIGKILL, resolved at the process's exit (at once for one already gone). */
  kill(child: ChildProcess): Promise<void>;
}

/** Registers the build (beforeAll) and the clean-up (afterAll) of a describe block's recurring processes. */
export function useRecurringProcesses(): RecurringProcesses {
  let build: WorkerBuild;
  const children = new Set<ChildProcess>();
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.NODE_OPTIONS; // Jest's --experimental-vm-modules is not for the children

  beforeAll(async () => {
    build = await buildWorker([fileURLToPath(new URL('./recurring-worker.ts', import.meta.url))]);
  });
  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    await build?.remove();
  });

  return {
    spawn() {
      const child = fork(build.script, [], { env, stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
      children.add(child);
      let stderr = '';
      child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
      child.once('exit', () => children.delete(child));
      const loaded = new Promise<void>((resolve, reject) => {
        child.once('message', () => resolve());
        child.once('exit', (code) => reject(new Error(`worker exited (${code}) before loading: ${stderr}`)));
      });
      loaded.catch(() => undefined); // a spare killed before it loaded is no failure; start() still sees the rejection
      return { child, loaded };
    },
    async start(instance, config) {
      await instance.loaded;
      const ready = new Promise<void>((resolve, reject) => {
        instance.child.once('message', () => resolve());
        instance.child.once('exit', (code) => reject(new Error(`worker exited (${code}) while starting`)));
      });
      instance.child.send({ type: 'start', config });
      await ready;
      return instance.child;
    },
    kill(child) {
      return new Promise((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGKILL');
      });
    },
  };
}

/** The database's clock, in epoch ms. */
export async function dbNow(db: pg.Pool): Promise<number> {
  return (await db.query<{ now: Date }>('SELECT now()')).rows[0].now.getTime();
}
