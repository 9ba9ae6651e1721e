import type { Pool, QueryConfig, QueryResult, QueryResultRow } from 'pg';
import { autocommitQuery } from './autocommit-query.js';

/**
 * The statements of one SQL file (FLOW_SQL, STEP_SQL, ...) on the queue's own pool, each by its key: named (prepared
 * once per connection, as `<prefix><key>`) unless a transaction pooler sits in between, where a named statement
 * prepared on one server connection is missing on the next.
 */
export class Statements<S extends Record<string, string>> {
  private readonly named: boolean;

  constructor(
    private readonly pool: Pool,
    private readonly sql: S,
    private readonly prefix: string,
    options: { transactionPooler?: boolean } = {},
  ) {
    this.named = !options.transactionPooler;
  }

  /** Runs statement `name`; its whole result (rowCount for a DELETE). */
  result<R extends QueryResultRow>(name: keyof S & string, values: unknown[]): Promise<QueryResult<R>> {
    const query: QueryConfig = this.named ? { name: `${this.prefix}${name}`, text: this.sql[name], values } : { text: this.sql[name], values };
    return autocommitQuery<R>(this.pool, query);
  }

  /** Runs statement `name`; its rows. */
  async rows<R extends QueryResultRow>(name: keyof S & string, values: unknown[]): Promise<R[]> {
    return (await this.result<R>(name, values)).rows;
  }
}
