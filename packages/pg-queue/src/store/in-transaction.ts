import type { Pool, PoolClient, QueryResult } from 'pg';

/**
 * Runs `work` in a transaction on one pooled connection; a connection whose rollback failed, or that errored
 * meanwhile, is discarded. A checked-out client has no pool listener: a connection killed between two
 * statements would emit an unhandled 'error' (and crash the host), so one is attached while it is out.
 */
/**
 * `begin` opens the transaction (a limited claim also tries its queue's lock there, in the same round trip); `work` gets
 * what it answered (one result per statement of a simple query of several).
 */
export async function inTransaction<T>(pool: Pool, work: (client: PoolClient, opened: QueryResult | QueryResult[]) => Promise<T>, begin = 'BEGIN'): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  const onError = (error: Error) => (broken = error);
  client.on('error', onError);
  try {
    const opened = (await client.query(begin)) as QueryResult | QueryResult[];
    try {
      const result = await work(client, opened);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch((rollbackError: Error) => (broken = rollbackError));
      throw error;
    }
  } finally {
    client.off('error', onError);
    // Released broken, the pool drops it and listens no more: a second error of its dying connection (the server's
    // "terminating connection" after the socket's) would be unhandled and crash the host. pg-pool's idle clients
    // get the same catch-all.
    if (broken) client.on('error', () => undefined);
    client.release(broken);
  }
}
