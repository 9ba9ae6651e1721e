import type pg from 'pg';

/**
 * The schema of the database's current schema as the catalog describes it, as comparable text (what `pg_dump
 * --schema-only` would show, without OIDs or creation order): tables with their columns, defaults, constraints and
 * storage parameters; indexes (definition and validity); triggers; functions; enum types with their labels in order;
 * sequences. (pg_dump itself refuses a server newer than itself, and the suite runs on PostgreSQL 13 to 18.)
 */
export async function schemaDump(db: pg.Pool | pg.PoolClient): Promise<Record<string, string[]>> {
  const lines = async (sql: string) => (await db.query<{ line: string }>(sql)).rows.map((r) => r.line);
  const inSchema = `n.nspname = current_schema()`;
  return {
    columns: await lines(`
      SELECT c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END
             || coalesce(' DEFAULT ' || pg_get_expr(d.adbin, d.adrelid), '') AS line
      FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
      WHERE ${inSchema} AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
      ORDER BY c.relname, a.attnum`),
    constraints: await lines(`
      SELECT c.relname || ' ' || k.conname || ' ' || pg_get_constraintdef(k.oid) AS line
      FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE ${inSchema} ORDER BY 1`),
    storage: await lines(`
      SELECT c.relname || ' ' || array_to_string(c.reloptions, ',') AS line
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE ${inSchema} AND c.reloptions IS NOT NULL ORDER BY 1`),
    indexes: await lines(`
      SELECT pg_get_indexdef(i.indexrelid) || CASE WHEN i.indisvalid THEN '' ELSE ' INVALID' END AS line
      FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE ${inSchema} ORDER BY 1`),
    triggers: await lines(`
      SELECT pg_get_triggerdef(t.oid) AS line
      FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE ${inSchema} AND NOT t.tgisinternal ORDER BY 1`),
    functions: await lines(`
      SELECT pg_get_functiondef(p.oid) AS line
      FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
      WHERE ${inSchema} ORDER BY p.proname`),
    enums: await lines(`
      SELECT t.typname || ' ' || string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder) AS line
      FROM pg_enum e JOIN pg_type t ON t.oid = e.enumtypid JOIN pg_namespace n ON n.oid = t.typnamespace
      WHERE ${inSchema} GROUP BY t.typname ORDER BY 1`),
    sequences: await lines(`
      SELECT c.relname AS line FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE ${inSchema} AND c.relkind = 'S' ORDER BY 1`),
  };
}
