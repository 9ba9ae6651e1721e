import type { LoggerService } from '@nestjs/common';
import { PgQueueError } from '../errors/pg-queue.error.js';
import { CITUS_INSTALLED, NOT_POSTGRESQL_SERVER, SERVER_ADDITIONS_UNREAD, SERVER_UNASKED } from '../pg-queue.messages.js';
import { DATABASE_SQL } from '../store/database.sql.js';
import { errorLine } from '../utils/error-text.js';
import { serverEngine } from './server-engine.js';

/** Runs one statement on the server being checked and returns its rows (a pg Pool's, a TypeORM DataSource's). */
export type ServerRows = (sql: string) => Promise<Record<string, unknown>[]>;

/**
 * Refuses a server that is not PostgreSQL proper, by name (server-engine.ts), before anything is written; logs Citus,
 * which is PostgreSQL with an extension. Called at boot before the migrations, and by `pg-queue migrate`. A server
 * that cannot be asked fails only where it is `required` (the migrations need it anyway): without them the module
 * starts with no database, as its loops wait out an outage.
 */
export async function checkServer(rows: ServerRows, logger: Pick<LoggerService, 'log' | 'warn'>, required: boolean): Promise<void> {
  let version: string;
  try {
    version = String((await rows(DATABASE_SQL.serverVersion))[0].version);
  } catch (error) {
    if (required) throw error;
    logger.warn(SERVER_UNASKED(errorLine(error)));
    return;
  }
  let engine = serverEngine({ version });
  if (engine.supported) {
    try {
      const [row] = (await rows(DATABASE_SQL.serverAdditions)) as { limitless: string | null; citus: string | null }[];
      engine = serverEngine({ version, limitlessTableMode: row.limitless, citusVersion: row.citus });
    } catch (error) {
      logger.warn(SERVER_ADDITIONS_UNREAD(errorLine(error)));
    }
  }
  if (!engine.supported) throw new PgQueueError(NOT_POSTGRESQL_SERVER(engine.engine, version));
  if (engine.citusVersion) logger.log(CITUS_INSTALLED(engine.citusVersion));
}
