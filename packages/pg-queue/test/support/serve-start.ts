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
