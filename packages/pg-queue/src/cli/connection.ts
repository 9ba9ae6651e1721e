import pg, { type Pool } from 'pg';
import { guardPool } from '../utils/pg-client.js';
import { parse } from 'pg-connection-string';
import type { DataSource } from 'typeorm';
import { JobStore } from '../store/job.store.js';
import { AdminStore } from '../store/admin.store.js';
import { FlowStore } from '../store/flow.store.js';
import { CONNECT_TIMEOUT, NO_DATABASE_URL, NO_NAMED_DATABASE_URL, NOT_A_POSTGRES_URL, PASSWORD_IN_URL, URL_AND_DATABASE } from './cli.messages.js';
import { formatDuration } from './duration.js';
import { CliError, UsageError } from './errors.js';
import { note } from './output.js';

/** The options every command takes (on the root command). */
export interface GlobalOptions {
  url?: string;
  /** --database: the URL is $DATABASE_URL_<NAME> (an app with several queue databases). */
  database?: string;
  transactionPooler?: boolean;
  verbose?: boolean;
  /** --connect-timeout, in ms. */
  connectTimeout?: number;
}

const APPLICATION_NAME = 'nestjs-pg-queue cli';
/** The default of --connect-timeout. */
const CONNECT_TIMEOUT_MS = 10_000;
/** What pg-pool and pg (a client of its own) say when a connection is not made within connectionTimeoutMillis. */
const CONNECT_TIMED_OUT = /^(timeout exceeded when trying to connect|Connection terminated due to connection timeout|timeout expired)$/;

/**
 * The database of one command run: a small pool (the queue's stores on it) opened on first use, and closed
 * by `close()`. The URL comes from --url or DATABASE_URL; its password never reaches the output: `mask`
 * hides it in every text the command prints, pg's error messages included.
 */
export class Connection {
  private pool?: Pool;
  private readonly secrets: string[];

  constructor(
    readonly url: string,
    readonly transactionPooler: boolean,
    readonly connectTimeoutMs = CONNECT_TIMEOUT_MS,
  ) {
    this.secrets = secretsOf(url);
  }

  static fromOptions(options: GlobalOptions): Connection {
    if (options.database !== undefined && options.url !== undefined) throw new UsageError(URL_AND_DATABASE());
    const variable = options.database === undefined ? 'DATABASE_URL' : databaseUrlVariable(options.database);
    const url = options.url ?? process.env[variable];
    if (!url) throw new UsageError(options.database === undefined ? NO_DATABASE_URL() : NO_NAMED_DATABASE_URL(options.database, variable));
    // Checked here: pg reads what it cannot parse as a host name ("not a url" dialled host "base").
    if (!isPostgresUrl(url)) throw new UsageError(NOT_A_POSTGRES_URL(options.url !== undefined ? '--url' : variable));
    // Anyone on the machine can read a command line while it runs: say so (the password itself is never printed).
    if (options.url !== undefined && passwordOf(url)) note(`pg-queue: ${PASSWORD_IN_URL()}`);
    return new Connection(url, options.transactionPooler === true, options.connectTimeout);
  }

  /**
   * The error as the operator should read it: a connection that was not made in time names --connect-timeout
   * (the library's own text names module options, poolSize and connectTimeoutMs, which the command does not have).
   */
  explain(error: unknown): unknown {
    for (let e: unknown = error; e instanceof Error; e = e.cause) {
      if (CONNECT_TIMED_OUT.test(e.message)) return new CliError(CONNECT_TIMEOUT(formatDuration(this.connectTimeoutMs)), { cause: error });
    }
    return error;
  }

  getPool(): Pool {
    if (!this.pool) {
      // A client that loses its server must not end the command with an uncaught 'error': the next query reports it.
      this.pool = guardPool(new pg.Pool({ connectionString: this.url, max: 3, application_name: APPLICATION_NAME, connectionTimeoutMillis: this.connectTimeoutMs }), () => undefined);
    }
    return this.pool;
  }

  jobStore(): JobStore {
    return new JobStore(this.getPool(), { transactionPooler: this.transactionPooler, poolSize: 3, connectTimeoutMs: this.connectTimeoutMs });
  }

  adminStore(): AdminStore {
    return new AdminStore(this.getPool());
  }

  flowStore(): FlowStore {
    return new FlowStore(this.getPool(), { transactionPooler: this.transactionPooler });
  }

  /** A one-connection TypeORM DataSource, for the migrations (run through TypeORM's migrations table). */
  async dataSource(migrationsTableName?: string): Promise<DataSource> {
    const { DataSource } = await import('typeorm');
    const dataSource = new DataSource({
      type: 'postgres',
      url: this.url,
      connectTimeoutMS: this.connectTimeoutMs,
      extra: { max: 1, application_name: `${APPLICATION_NAME} migrations` },
      migrationsTableName,
      synchronize: false,
      migrationsRun: false,
    });
    await dataSource.initialize();
    return dataSource;
  }

  /** A client of its own (not from the pool): LISTEN, probes. */
  client(): pg.Client {
    return new pg.Client({ connectionString: this.url, application_name: APPLICATION_NAME, connectionTimeoutMillis: this.connectTimeoutMs });
  }

  /** The URL as it may be shown. */
  describe(): string {
    return this.mask(this.url);
  }

  mask(text: string): string {
    let masked = text.replace(/(postgres(?:ql)?:\/\/[^:/@\s]*:)[^@\s]*@/gi, '$1****@');
    for (const secret of this.secrets) masked = masked.split(secret).join('****');
    return masked;
  }

  async close(): Promise<void> {
    await this.pool?.end().catch(() => undefined);
  }
}

function passwordOf(url: string): string | undefined {
  try {
    return parse(url).password || undefined;
  } catch {
    return undefined; // An unparseable URL: the regular expression in mask() still hides what looks like a password.
  }
}

/** The password of the URL (as written and decoded) and PGPASSWORD, longest first. */
function secretsOf(url: string): string[] {
  const secrets = new Set<string>();
  const password = passwordOf(url);
  if (password) secrets.add(password);
  const raw = /^[a-z]+:\/\/[^:/@\s]*:([^@\s]*)@/i.exec(url)?.[1];
  if (raw) secrets.add(raw);
  if (process.env.PGPASSWORD) secrets.add(process.env.PGPASSWORD);
  return [...secrets].filter((s) => s.length > 0).sort((a, b) => b.length - a.length);
}

function isPostgresUrl(url: string): boolean {
  try {
    return ['postgres:', 'postgresql:', 'socket:'].includes(new URL(url).protocol);
  } catch {
    return false;
  }
}

/** The variable that holds the URL of the queue database named `name` (--database reports: DATABASE_URL_REPORTS). */
export function databaseUrlVariable(name: string): string {
  return `DATABASE_URL_${name.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`;
}
