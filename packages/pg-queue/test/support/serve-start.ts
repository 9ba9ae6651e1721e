import { fork, type ChildProcess } from 'node:child_process';

/**
 * The forked side of the start protocol every process test's worker speaks: say `loaded`, wait for one
 * `start` message, boot with it, answer `ready` (or print the error and exit 1), and exit when the test's
 * process goes away (orphaned workers must not work on against a test database). buildWorker compiles this
 * file with every worker script.
 */
export function serveStart<M extends { type: string }>(boot: (message: M) => Promise<void>): void {
  let started = false;
  process.on('message', (message: M) => {
    if (message.type !== 'start' || started) return;
    started = true;
    boot(message).then(
      () => process.send?.({ type: 'ready' }),
      (error: unknown) => {
        process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
        process.exit(1);
      },
    );
  });
  process.on('disconnect', () => process.exit(0));
  process.send?.({ type: 'loaded' });
}

/**
 * The test's side of the protocol: forks `script` and resolves once it has loaded its code (its boot is startForked's).
 * The worker's stderr is the test process's unless `stderr: 'pipe'` (then the caller must read child.stderr): under
 * `npm test` the test process is a Jest worker, and jest-worker reads its stderr for V8's out-of-memory texts ("heap out
 * of memory", "Last few GCs"), taking any such line as its own crash: a worker that prints one (a thread stopped at its
 * heap limit, a worker process that really ran out) would end the Jest worker and fail its spec as out of memory.
 */
export async function forkLoaded(script: string, env?: Record<string, string>, options: { stderr?: 'inherit' | 'pipe' } = {}): Promise<ChildProcess> {
  const child = fork(script, [], { stdio: ['ignore', 'ignore', options.stderr ?? 'inherit', 'ipc'], env: env && { ...process.env, ...env } });
  await new Promise<void>((resolve, reject) => {
    const loaded = (m: { type: string }) => {
      if (m.type !== 'loaded') return;
      child.off('message', loaded);
      child.off('exit', early);
      resolve();
    };
    const early = (code: number | null) => reject(new Error(`worker exited with ${code} before it loaded`));
    child.on('message', loaded);
    child.once('exit', early);
  });
  return child;
}

/** Boots a loaded worker with `message` (the `start` message's other fields) and resolves once it is ready. */
export async function startForked(child: ChildProcess, message: object): Promise<ChildProcess> {
  await new Promise<void>((resolve, reject) => {
    const ready = (m: { type: string }) => {
      if (m.type !== 'ready') return;
      child.off('message', ready);
      child.off('exit', early);
      resolve();
    };
    const early = (code: number | null) => reject(new Error(`worker exited with ${code} before it was ready`));
    child.on('message', ready);
    child.once('exit', early);
    child.send({ ...message, type: 'start' });
  });
  return child;
}
