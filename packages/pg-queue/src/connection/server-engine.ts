/**
 * Which engine a server is, from what it reports, so that a server that is not PostgreSQL proper is refused at boot
 * by name (docs/guides/distributed-postgres.md) instead of failing later, in a migration or a claim.
 *
 * server_version cannot tell: CockroachDB and YugabyteDB speak PostgreSQL's wire protocol and report a PostgreSQL
 * server_version (CockroachDB 26.3 reports 18). version() can: CockroachDB's starts "CockroachDB CCL v23.1.11
 * (x86_64-pc-linux-gnu, built ...)" (or "CockroachDB OSS"), YugabyteDB's is PostgreSQL's with the YugabyteDB release
 * after "-YB-" ("PostgreSQL 15.2-YB-2.25.0.0-b0 on ..."). Engines built on PostgreSQL itself report PostgreSQL's
 * version(), so they are told apart by what they add: Aurora PostgreSQL Limitless Database by its
 * rds_aurora.limitless_create_table_mode setting, Citus (an extension, allowed: the queue's tables stay plain local
 * tables on the coordinator) by its row in pg_extension.
 */
export interface ServerReport {
  /** `SELECT version()`. */
  version: string;
  /** current_setting('rds_aurora.limitless_create_table_mode', true): null, or unread, on any other server. */
  limitlessTableMode?: string | null;
  /** The citus extension's version in this database, if it is installed. */
  citusVersion?: string | null;
}

export type ServerEngine =
  | { supported: true; engine: 'PostgreSQL'; citusVersion?: string }
  | { supported: false; engine: string };

export function serverEngine(report: ServerReport): ServerEngine {
  const version = report.version.trim();
  if (/^CockroachDB\b/i.test(version)) return { supported: false, engine: 'CockroachDB' };
  if (/^PostgreSQL \S*-YB-/.test(version)) return { supported: false, engine: 'YugabyteDB' };
  if (!/^PostgreSQL \d/.test(version)) return { supported: false, engine: engineNamed(version) };
  if (report.limitlessTableMode != null) return { supported: false, engine: 'Aurora PostgreSQL Limitless Database' };
  return report.citusVersion ? { supported: true, engine: 'PostgreSQL', citusVersion: report.citusVersion } : { supported: true, engine: 'PostgreSQL' };
}

/** The words before a banner's version number ("Redpanda SQL 1.2.0 (abc1234)": "Redpanda SQL"). */
function engineNamed(version: string): string {
  if (version === '') return 'an engine whose version() is empty';
  const name = /^([^\d(,]*?)\s*(?:v?\d|\(|,|$)/.exec(version)?.[1];
  return name ? `an engine that reports itself as "${name}"` : 'an engine that is not PostgreSQL';
}
