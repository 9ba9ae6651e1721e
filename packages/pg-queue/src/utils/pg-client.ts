import type pg from 'pg';

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
