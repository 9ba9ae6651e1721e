import { withClient } from './sql.js';

export interface RelationSizes {
  tableBytes: number;
  indexBytes: number;
  rows: number;
}

/** Heap (with TOAST, free-space and visibility maps) and all indexes of the job tables, and their row count. */
export async function relationSizes(url: string, relations: string[]): Promise<RelationSizes> {
  return withClient(url, async (c) => {
    const total: RelationSizes = { tableBytes: 0, indexBytes: 0, rows: 0 };
    for (const relation of relations) {
      const r = (await c.query<{ t: string; i: string; n: string }>(
        `SELECT pg_table_size($1::regclass) AS t, pg_indexes_size($1::regclass) AS i, (SELECT count(*) FROM ${relation}) AS n`,
        [relation],
      )).rows[0];
      total.tableBytes += Number(r.t);
      total.indexBytes += Number(r.i);
      total.rows += Number(r.n);
    }
    return total;
  });
}
