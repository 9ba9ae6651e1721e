import { randomBytes } from 'node:crypto';
import { PgQueueError } from '../errors/pg-queue.error.js';
import { DATABASE_NAME_PATTERN, DEFAULT_DATABASE } from '../pg-queue.constants.js';
import { DASHBOARD_BAD_OPTION, DASHBOARD_NO_AUTH, DASHBOARD_UNKNOWN_OPTION } from './dashboard.messages.js';
import type { DashboardAuthorize, DashboardGuardAuth, PgQueueDashboardOptions } from './dashboard-options.interface.js';

/** Options after validation and defaults. */
export interface ResolvedDashboardOptions {
  path: string;
  /** The callback, or null when a guard (or public) decides. */
  authorize: DashboardAuthorize | null;
  guarded: boolean;
  public: boolean;
  readOnly: boolean;
  hidePayloads: boolean;
  refreshMs: number;
  statementTimeoutMs: number;
  csrfSecret: Buffer;
  pageSize: number;
  /** The PgQueueModule (database) it shows: DEFAULT_DATABASE for the one without a name. */
  database: string;
}

const KNOWN = ['path', 'auth', 'public', 'readOnly', 'hidePayloads', 'refreshMs', 'statementTimeoutMs', 'csrfSecret', 'pageSize', 'database'];

/** The `database` option: a PgQueueModule's name (whether one has it is checked once the app's modules exist). */
export function dashboardDatabase(database: unknown): string {
  if (database === undefined) return DEFAULT_DATABASE;
  if (typeof database !== 'string' || !DATABASE_NAME_PATTERN.test(database)) throw new PgQueueError(DASHBOARD_BAD_OPTION('database', database, "the name of one of the app's PgQueueModule imports"));
  return database;
}

/** 'admin/queues', '/admin/queues/' -> 'admin/queues'; letters, digits and - _ . ~ per segment. */
export function normalizeDashboardPath(path: unknown): string {
  if (typeof path !== 'string') throw new PgQueueError(DASHBOARD_BAD_OPTION('path', path, "a string such as 'admin/queues'"));
  const trimmed = path.replace(/^\/+|\/+$/g, '');
  if (!/^[A-Za-z0-9._~-]+(\/[A-Za-z0-9._~-]+)*$/.test(trimmed)) {
    throw new PgQueueError(DASHBOARD_BAD_OPTION('path', path, 'a non-empty URL path of letters, digits, - _ . ~ and /'));
  }
  return trimmed;
}

/** Validates the options at boot: a missing authorisation hook or a bad value fails there, naming the option. */
export function resolveDashboardOptions(options: PgQueueDashboardOptions, staticGuard = false): ResolvedDashboardOptions {
  if (options === null || typeof options !== 'object') throw new PgQueueError(DASHBOARD_BAD_OPTION('options', options, 'an object'));
  for (const key of Object.keys(options)) if (!KNOWN.includes(key)) throw new PgQueueError(DASHBOARD_UNKNOWN_OPTION(key, KNOWN));
  const path = normalizeDashboardPath(options.path);
  const flag = (key: 'public' | 'readOnly' | 'hidePayloads') => {
    const value = options[key];
    if (value !== undefined && typeof value !== 'boolean') throw new PgQueueError(DASHBOARD_BAD_OPTION(key, value, 'true or false'));
    return value === true;
  };
  const int = (key: 'refreshMs' | 'statementTimeoutMs' | 'pageSize', fallback: number, min: number, max: number, zeroOk = false) => {
    const value = options[key] ?? fallback;
    if (!Number.isInteger(value) || ((value < min || value > max) && !(zeroOk && value === 0))) {
      throw new PgQueueError(DASHBOARD_BAD_OPTION(key, value, `an integer from ${min} to ${max}${zeroOk ? ' (or 0: off)' : ''}`));
    }
    return value;
  };
  const isPublic = flag('public');
  const auth = options.auth;
  let authorize: DashboardAuthorize | null = null;
  let guarded = staticGuard;
  if (typeof auth === 'function') authorize = auth;
  else if (auth !== undefined) {
    if (auth === null || typeof auth !== 'object' || typeof (auth as DashboardGuardAuth).guard !== 'function') {
      throw new PgQueueError(DASHBOARD_BAD_OPTION('auth', auth, "a function (request) => 'full' | 'read-only' | 'denied', or { guard: YourGuard }"));
    }
    guarded = true;
  }
  if (!authorize && !guarded && !isPublic) throw new PgQueueError(DASHBOARD_NO_AUTH(path));
  if (isPublic && (authorize || guarded)) throw new PgQueueError(DASHBOARD_BAD_OPTION('public', true, 'left out when auth is given (public means no authorisation at all)'));
  const secret = options.csrfSecret;
  if (secret !== undefined && (typeof secret !== 'string' || secret.length < 32)) {
    throw new PgQueueError(DASHBOARD_BAD_OPTION('csrfSecret', secret === undefined ? secret : '(hidden)', 'a string of at least 32 characters'));
  }
  return {
    path,
    authorize,
    guarded,
    public: isPublic,
    readOnly: flag('readOnly'),
    hidePayloads: flag('hidePayloads'),
    refreshMs: int('refreshMs', 5_000, 1_000, 3_600_000, true),
    statementTimeoutMs: int('statementTimeoutMs', 3_000, 100, 600_000),
    csrfSecret: secret === undefined ? randomBytes(32) : Buffer.from(secret, 'utf8'),
    pageSize: int('pageSize', 50, 1, 500),
    database: dashboardDatabase(options.database),
  };
}
