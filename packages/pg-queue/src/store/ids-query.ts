// An ambient module declaration cannot be imported; the reference keeps this file compilable in any program that
// includes it (the typed-queues test compiles a user's file against these sources). Not carried into dist's .d.ts.
// eslint-disable-next-line @typescript-eslint/triple-slash-reference
/// <reference path="../types/pg-lib-utils.d.ts" />
import type { Connection, Pool, PoolClient, QueryConfig, Submittable } from 'pg';
// node-postgres's own conversion of parameter values (Date, arrays, Buffer, null), the one its Query uses; pg-cursor
// imports it the same way. A public path of the package ("./lib/*" in its exports).
import pgUtils from 'pg/lib/utils.js';

/** The parts of node-postgres's Connection a statement writes with (its Query and pg-cursor use the same). */
interface WireConnection {
  stream: { cork?: () => void; uncork?: () => void };
  parsedStatements: Record<string, string>;
  /** Since pg 8.23 (pipelining): a Parse sent, its ParseComplete not yet back. Absent before. */
  submittedNamedStatements?: Record<string, string>;
  parse(message: { text: string; name?: string }): void;
  bind(message: { statement?: string; values: unknown[]; valueMapper: (value: unknown) => unknown }): void;
  execute(message: { portal?: string; rows?: number }): void;
  close(message: { type: 'S'; name?: string }): void;
  sync(): void;
  sendCopyFail(message: string): void;
}

type Callback = (error: Error | null, ids?: string[]) => void;

/**
 * One statement whose answer is a single column of ids (the enqueue inserts' `RETURNING id`), run without asking
 * PostgreSQL to describe its result. node-postgres's Query sends Describe with every execution: PostgreSQL looks up
 * the result's column types and sends a RowDescription, and the client parses it, builds its type parsers and an
 * object per row. For a one-row insert that was 5-10% of the call (docs/performance.md, Enqueue against the plain
 * loop): one call at a time, `INSERT ... RETURNING id` through Query ran at 0.90-0.95x the same INSERT without
 * RETURNING, and at 1.00-1.02x through this. Without Describe the rows still come back, in text (the Bind asks for
 * no other format), so the first field of each DataRow is the id as node-postgres gives an int8: a string.
 *
 * A Submittable, the interface node-postgres offers for this (pg-cursor is one): the client hands it the wire
 * messages of its turn. It follows Query's protocol exactly otherwise: Parse once per connection for a named
 * statement, Bind, Execute and Sync in one write; an error settles it at once (the client then waits for the
 * ReadyForQuery itself); `callback` is called through the property, which the client wraps for query_timeout.
 * Works with every pg of the peer range (ids-query.spec.ts runs on 8.11 and on the newest); a client in pg's
 * pipeline mode, which refuses Submittables, runs the statement through pg's own Query instead (queryIds).
 */
class IdsQuery implements Submittable {
  private readonly ids: string[] = [];
  private settled = false;

  constructor(
    readonly name: string | undefined,
    readonly text: string,
    private readonly values: unknown[],
    public callback: Callback,
  ) {}

  submit(connection: Connection): void {
    const wire = connection as unknown as WireConnection;
    wire.stream.cork?.();
    try {
      const prepared = this.name !== undefined && (wire.parsedStatements[this.name] !== undefined || wire.submittedNamedStatements?.[this.name] !== undefined);
      if (!prepared) {
        wire.parse({ text: this.text, name: this.name });
        if (this.name !== undefined && wire.submittedNamedStatements) wire.submittedNamedStatements[this.name] = this.text;
      }
      try {
        wire.bind({ statement: this.name, values: this.values, valueMapper: pgUtils.prepareValue });
      } catch (error) {
        // A value node-postgres cannot convert: nothing was executed. Close the parse, as Query does.
        wire.close({ type: 'S', name: this.name });
        wire.sync();
        this.handleError(error instanceof Error ? error : new Error(String(error)));
        return;
      }
      wire.execute({});
      wire.sync();
    } finally {
      wire.stream.uncork?.();
    }
  }

  handleDataRow(message: { fields: (string | null)[] }): void {
    this.ids.push(message.fields[0] as string);
  }

  handleError(error: Error): void {
    this.settle(error);
  }

  handleReadyForQuery(): void {
    this.settle(null);
  }

  // Not sent for this statement (no Describe, no COPY, no row limit), but the client may call them: nothing to do.
  handleRowDescription(): void {}
  handleCommandComplete(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}
  handleCopyData(): void {}
  handleCopyInResponse(connection: Connection): void {
    (connection as unknown as WireConnection).sendCopyFail('not a COPY statement');
  }

  private settle(error: Error | null): void {
    if (this.settled) return;
    this.settled = true;
    if (error) this.callback(error);
    else this.callback(null, this.ids);
  }
}

/**
 * Runs `query` (its name, text and values; a statement that returns one column of ids) on a client of `pool`, in a
 * transaction of its own, and resolves with the ids in the order PostgreSQL returned them. As pool.query: a client
 * that fails is released with the error, so the pool drops it.
 */
export async function queryIds(pool: Pool, query: QueryConfig): Promise<string[]> {
  const client: PoolClient = await pool.connect();
  if ((client as { pipeline?: boolean }).pipeline) {
    // pg's pipeline mode (an option of the app's pool settings) takes its own Query only: the usual way, then.
    let failed: unknown;
    try {
      return (await client.query<{ id: string }>(query)).rows.map((r) => r.id);
    } catch (error) {
      failed = error;
      throw error;
    } finally {
      client.release(failed as Error | undefined);
    }
  }
  // A checked-out client has no listener of the pool's: a connection lost now must not throw from an emitter.
  let lost: Error | undefined;
  const onError = (error: Error) => {
    lost = error;
  };
  client.on('error', onError);
  try {
    return await new Promise<string[]>((resolve, reject) => {
      client.query(new IdsQuery(query.name, query.text, query.values ?? [], (error, ids) => (error ? reject(error) : resolve(ids!))));
    });
  } catch (error) {
    lost ??= error as Error;
    throw error;
  } finally {
    client.off('error', onError);
    if (lost) client.on('error', () => undefined); // dropped by the pool: a later error of it must not crash the host (inTransaction)
    client.release(lost);
  }
}
