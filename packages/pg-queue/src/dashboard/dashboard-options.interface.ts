import type { CanActivate, InjectionToken, ModuleMetadata, OptionalFactoryDependency, Type } from '@nestjs/common';

/** What a user may do: everything, look only, or nothing (403). */
export type DashboardAccess = 'full' | 'read-only' | 'denied';

/** An authorisation hook's detailed answer. */
export interface DashboardAuthResult {
  access: DashboardAccess;
  /** Who it is: named in the log line of each action. */
  user?: string;
  /**
   * With access 'denied': ask for credentials instead of refusing, answering 401 with this
   * WWW-Authenticate value (e.g. `Basic realm="pg-queue", charset="UTF-8"`).
   */
  challenge?: string;
}

/**
 * Decides each request's access. `request` is the HTTP adapter's request object (Express `Request` or
 * Fastify `FastifyRequest`: both have `headers`); it runs on every page, asset and action of the dashboard.
 */
export type DashboardAuthorize = (request: DashboardRequest) => DashboardAccess | DashboardAuthResult | Promise<DashboardAccess | DashboardAuthResult>;

/** The part of the adapter's request an authorisation hook can count on. */
export interface DashboardRequest {
  headers: Record<string, string | string[] | undefined>;
  /** What a guard or an authentication middleware left there, if anything (Passport: the user). */
  user?: unknown;
  [key: string]: unknown;
}

/** Authorisation by a Nest guard: a request it lets through gets full access (or read-only access with `readOnly`). */
export interface DashboardGuardAuth {
  guard: Type<CanActivate>;
}

export interface PgQueueDashboardOptions {
  /** Where the dashboard is mounted, e.g. 'admin/queues' (under the app's global prefix, if any). */
  path: string;
  /**
   * Who may see and do what: a callback returning 'full' | 'read-only' | 'denied' (or a DashboardAuthResult
   * with the user's name), or `{ guard }`. Required unless `public: true`: the module refuses to boot without it.
   */
  auth?: DashboardAuthorize | DashboardGuardAuth;
  /** Mount with no authorisation at all: every visitor gets full access (or read-only with `readOnly`). Must be exactly true. */
  public?: boolean;
  /** Nobody may change anything: no action buttons, and every POST is refused (403). Default false. */
  readOnly?: boolean;
  /**
   * Never show payloads, results, progress or last errors (they may hold personal data; handlers often put payload
   * data in their errors): the pages say "hidden". Queue names, unique and concurrency keys still show. Default false.
   */
  hidePayloads?: boolean;
  /** How often an open overview polls the summary endpoint (one count statement), in ms; 0 turns auto-refresh off. Default 5000, at least 1000. */
  refreshMs?: number;
  /** Statement timeout of every query the dashboard runs, in ms. Default 3000. */
  statementTimeoutMs?: number;
  /**
   * Key of the CSRF tokens' HMAC (at least 32 characters). Default: random per process, which is fine for one
   * instance; behind a load balancer give every instance the same secret, or a form served by one instance is
   * refused by another.
   */
  csrfSecret?: string;
  /** Rows per page of the jobs list. Default 50, at most 500. */
  pageSize?: number;
  /**
   * The database whose queues it shows, in an app with several: the `name` of its PgQueueModule (default: the module
   * without a name). Mount one dashboard per database; each links to the others (docs/guides/several-databases.md).
   */
  database?: string;
}

/** forRootAsync: `path` and a guard are needed when the routes are declared, so they are given up front. */
export interface PgQueueDashboardAsyncOptions extends Pick<ModuleMetadata, 'imports'> {
  path: string;
  /** As PgQueueDashboardOptions.database: known when the module is defined, so given up front. */
  database?: string;
  /** A Nest guard for the dashboard's routes (the factory may then leave `auth` out). */
  guard?: Type<CanActivate>;
  inject?: (InjectionToken | OptionalFactoryDependency)[];
  /** Receives the `inject` providers in order; returns every option but `path`. */
  useFactory: (...args: never[]) => Omit<PgQueueDashboardOptions, 'path' | 'database'> | Promise<Omit<PgQueueDashboardOptions, 'path' | 'database'>>;
}
