import type pg from 'pg';
import type { Pool } from 'pg';

type WithStream = { connection?: { stream?: { destroyed?: boolean; destroy(): void } } };

/** Ends a client at once, without waiting for a goodbye a dead peer would never answer. */
export function cutClient(client: pg.Client | undefined): void {
  const stream = (client as unknown as WithStream | undefined)?.connection?.stream;
  if (!stream || stream.destroyed) return;
  stream.destroy();
  client!.end().catch(() => undefined);
}

/**
 * Cuts a client that is still connecting (its socket destroyed, never end()ed: pg never settles connect() on a
 * client ended while it connects), so that its connect() fails.
 */
export function abortConnect(client: pg.Client | undefined): void {
  (client as unknown as WithStream | undefined)?.connection?.stream?.destroy();
}

/**
 * Makes a pool the library opens safe for its host, where the pool is made (the queue's pools, the dashboard's, the
 * CLI's): without a listener, a connection's 'error' event is an uncaught exception that ends the process.
 * - An idle client that loses its server emits on the pool: `onIdleError` (a warning in the app, nothing in the CLI,
 *   whose next query reports the failure).
 * - A client checked out of the pool has no listener of the pool's: a connection lost between two of its statements
 *   (a restart of PostgreSQL, pg_terminate_backend) emits on the client with no query to take it. Every client
 *   listens from its first connect, so every path that checks one out is covered, present and future. The error is
 *   not lost: the client's next query fails with it ("not queryable"), its holder releases it broken, and an idle
 *   client's still reaches `onIdleError`.
 */
export function guardPool(pool: Pool, onIdleError: (error: Error) => void): Pool {
  pool.on('error', onIdleError);
  pool.on('connect', (client) => client.on('error', () => undefined));
  return pool;
}
