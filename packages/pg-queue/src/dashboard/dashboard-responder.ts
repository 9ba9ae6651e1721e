import type { HttpAdapterHost } from '@nestjs/core';
import { createHmac } from 'node:crypto';
import { PgQueueError } from '../errors/pg-queue.error.js';
import { PgQueueLogger } from '../utils/pg-queue-logger.js';
import { ADD_JOB_FIELDS } from './dashboard-add-job.js';
import { authorizeRequest, type Viewer } from './dashboard-auth.js';
import { DashboardCsrf } from './dashboard-csrf.js';
import { field, fields, mountBase, requestUrl, returnPath, SECURITY_HEADERS, type AnyRequest } from './dashboard-http.js';
import { LIMIT_FIELDS } from './dashboard-limits.js';
import { WEIGHT_FIELDS } from './views/queue-weights.view.js';
import { SCHEDULE_FIELDS } from './dashboard-schedule-form.js';
import type { DashboardService } from './dashboard.service.js';
import type { ResolvedDashboardOptions } from './resolve-dashboard-options.js';
import { confirmPage, errorPage, type PageContext } from './views/layout.js';

export type AnyResponse = object;

interface Entered {
  viewer: Viewer;
  ctx: PageContext;
}

/** A checked POST: the question it asks before it runs, and what it does (returns the flash message). */
export interface PreparedAction {
  question: string;
  run: (viewer: Viewer) => Promise<string>;
}

/** The form fields a confirmation page carries to the confirmed POST (a browser without JavaScript). */
const CARRIED_FIELDS = new Set(['queue', 'status', 'source', ...LIMIT_FIELDS, ...WEIGHT_FIELDS, ...ADD_JOB_FIELDS, ...SCHEDULE_FIELDS]);

/**
 * What every route of the dashboard does around its own work: access (401/403), the CSRF check and confirmation of a
 * POST, the page context, errors as status codes, and the answer itself. Raw request and response objects go through
 * the HTTP adapter's own reply, header and redirect methods, so the same code serves Express and Fastify.
 */
export class DashboardResponder {
  private readonly logger = new PgQueueLogger('PgQueueDashboard');
  private readonly csrf: DashboardCsrf;

  constructor(
    private readonly dashboard: DashboardService,
    private readonly options: ResolvedDashboardOptions,
    private readonly adapterHost: HttpAdapterHost,
  ) {
    this.csrf = new DashboardCsrf(options.csrfSecret);
  }

  send(res: AnyResponse, status: number, type: string, body: string, headers: Record<string, string> = {}): void {
    const adapter = this.adapterHost.httpAdapter;
    for (const [name, value] of Object.entries({ ...SECURITY_HEADERS, 'Cache-Control': 'no-store', ...headers, 'Content-Type': type })) adapter.setHeader(res, name, value);
    adapter.reply(res, body, status);
  }

  /** Authorises the request (401/403 when denied), and for a POST checks full access and the CSRF token. */
  async enter(req: AnyRequest, res: AnyResponse, suffix: string, write: boolean): Promise<Entered | null> {
    const outcome = await authorizeRequest(this.options, req);
    if ('denied' in outcome) {
      if (outcome.challenge) this.send(res, 401, 'text/plain; charset=utf-8', 'Authentication required.', { 'WWW-Authenticate': outcome.challenge });
      else this.send(res, 403, 'text/plain; charset=utf-8', 'Access to the queue dashboard denied.');
      return null;
    }
    const { viewer } = outcome;
    const base = mountBase(req, suffix);
    const { nonce, setCookie } = this.csrf.nonceFor(req, base);
    if (setCookie) this.adapterHost.httpAdapter.setHeader(res, 'Set-Cookie', setCookie);
    if (write) {
      if (viewer.access !== 'full') {
        this.logger.warn(`refused a POST to ${suffix} by ${viewer.user ?? 'an anonymous user'}: read-only access`);
        this.send(res, 403, 'text/plain; charset=utf-8', 'Read-only access: actions are not allowed.');
        return null;
      }
      if (!this.csrf.verify(req)) {
        this.logger.warn(`refused a POST to ${suffix} by ${viewer.user ?? 'an anonymous user'}: CSRF token missing or wrong`);
        this.send(res, 403, 'text/plain; charset=utf-8', 'CSRF token missing or wrong: reload the page and try again.');
        return null;
      }
    }
    const url = requestUrl(req);
    const ctx: PageContext = {
      base,
      here: url.pathname + url.search,
      canAct: viewer.access === 'full',
      user: viewer.user,
      access: viewer.access,
      csrfToken: this.csrf.token(nonce),
      refreshMs: this.options.refreshMs,
      hidePayloads: this.options.hidePayloads,
      flash: this.flashOf(url),
      databases: this.dashboard.dashboards().map(({ database, path }) => ({
        name: database,
        // The other dashboards' bases: this one's with its own configured path swapped for theirs (same prefix).
        base: `${base.slice(0, base.length - this.options.path.length)}${path}`,
        current: database === this.options.database,
      })),
    };
    return { viewer, ctx };
  }

  async page(req: AnyRequest, res: AnyResponse, suffix: string, render: (ctx: PageContext) => Promise<string | [number, string]>): Promise<void> {
    const entered = await this.enter(req, res, suffix, false);
    if (!entered) return;
    await this.guarded(res, entered.ctx, async () => {
      const out = await render(entered.ctx);
      const [status, body] = typeof out === 'string' ? [200, out] : out;
      this.send(res, status, 'text/html; charset=utf-8', body);
    });
  }

  async asset(req: AnyRequest, res: AnyResponse, suffix: string, type: string, body: string): Promise<void> {
    if (!(await this.enter(req, res, suffix, false))) return;
    // The URL carries the content's hash (ASSET_VERSION), so a browser may keep it.
    this.send(res, 200, type, body, { 'Cache-Control': 'private, max-age=31536000, immutable' });
  }

  /**
   * A POST: refused unless full access and a valid CSRF token. `prepare` checks the request (a PgQueueError is a
   * 400) and says what the action asks and does; unconfirmed, the answer is a page that asks it.
   */
  async action(req: AnyRequest, res: AnyResponse, suffix: string, prepare: () => PreparedAction): Promise<void> {
    const entered = await this.enter(req, res, suffix, true);
    if (!entered) return;
    const { ctx, viewer } = entered;
    const back = returnPath(ctx.base, field(req, 'return'));
    await this.guarded(res, ctx, async () => {
      const { question, run } = prepare();
      if (field(req, 'confirmed') !== '1') {
        const carried: Record<string, string | string[]> = { return: back };
        for (const key of CARRIED_FIELDS) {
          const value = field(req, key);
          if (value) carried[key] = value;
        }
        const ids = fields(req, 'id');
        if (ids.length > 0) carried.id = ids;
        this.send(res, 200, 'text/html; charset=utf-8', confirmPage(ctx, suffix, question, carried));
        return;
      }
      const message = await run(viewer);
      const target = new URL(back, 'http://dashboard.invalid');
      target.searchParams.set('flash', message);
      target.searchParams.set('flash_sig', this.sign(message));
      for (const [name, value] of Object.entries(SECURITY_HEADERS)) this.adapterHost.httpAdapter.setHeader(res, name, value);
      this.adapterHost.httpAdapter.redirect(res, 303, target.pathname + target.search);
    });
  }

  /** Runs a handler's work; bad input answers 400, a statement timeout 503, anything else 500 (logged). */
  async guarded(res: AnyResponse, ctx: PageContext | null, work: () => Promise<void>): Promise<void> {
    try {
      await work();
    } catch (error) {
      const [status, title, message] =
        error instanceof PgQueueError
          ? [400, 'Bad request', error.message]
          : (error as { code?: string }).code === '57014'
            ? [503, 'Too slow', `The query ran past the dashboard's statement timeout (${this.options.statementTimeoutMs} ms): narrow the filter, or raise statementTimeoutMs.`]
            : [500, 'Error', 'The dashboard failed to answer; the server log has the details.'];
      if (status === 500) this.logger.error(`a dashboard request failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
      if (ctx) this.send(res, status, 'text/html; charset=utf-8', errorPage(ctx, title, message));
      else this.send(res, status, 'text/plain; charset=utf-8', message);
    }
  }

  /** The flash message of a redirect, shown only when signed by this dashboard (no text injected by a link). */
  private flashOf(url: URL): string | null {
    const message = url.searchParams.get('flash');
    const sig = url.searchParams.get('flash_sig');
    return message && sig && sig === this.sign(message) ? message.slice(0, 300) : null;
  }

  private sign(message: string): string {
    return createHmac('sha256', this.options.csrfSecret).update(`flash:${message}`).digest('base64url').slice(0, 22);
  }
}
