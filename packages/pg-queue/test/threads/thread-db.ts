// The thread files' own connection (cpu.thread.ts, slow-load.thread.ts): a thread cannot use the main thread's
// pools, so each thread opens one client on first use, to THREAD_TEST_URL, and keeps it. Compiled beside them by
// build-worker.ts (the specs list it).
import pg from 'pg';

let client: Promise<pg.Client> | undefined;

export function threadDb(): Promise<pg.Client> {
  return (client ??= (async () => {
    const c = new pg.Client({ connectionString: process.env.THREAD_TEST_URL });
    c.on('error', () => undefined);
    await c.connect();
    return c;
  })());
}
