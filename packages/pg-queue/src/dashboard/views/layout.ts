import { ASSET_VERSION } from '../assets/asset-version.js';
import { html, type HtmlValue, type SafeHtml } from './html.js';

/** What every view needs to know about the request: where the dashboard is, who looks, and the CSRF token. */
export interface PageContext {
  /** The dashboard's mount path as the browser sees it (with the app's global prefix), no trailing slash. */
  base: string;
  /** The current page's path and query, for forms to come back to. */
  here: string;
  canAct: boolean;
  user: string | null;
  access: 'full' | 'read-only';
  csrfToken: string;
  refreshMs: number;
  hidePayloads: boolean;
  /** A message of the last action (from the redirect's query), shown once. */
  flash: string | null;
  /** The app's dashboards, one per database, when it has several (README: several databases); else empty. */
  databases: { name: string; base: string; current: boolean }[];
}

export type Section = 'overview' | 'jobs' | 'flows' | 'schedules' | 'instances' | 'events';

/**
 * `refresh`: the page's counts follow the summary endpoint. `live`: the page reloads its content in place every
 * refreshMs (a job's page while the job has not finished, the jobs list's first page): its `[data-live]` regions, or
 * all of `<main>` when it has none. Either shows the "Pause live updates" button (the script unhides it).
 */
export function layout(ctx: PageContext, section: Section, title: string, body: SafeHtml, options: { refresh?: boolean; live?: boolean } = {}): string {
  const refreshing = options.refresh && ctx.refreshMs > 0;
  const following = options.live && ctx.refreshMs > 0;
  const nav = (id: Section, href: string, label: string) => html`<a href="${ctx.base}${href}"${id === section ? html` aria-current="page"` : null}>${label}</a>`;
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<title>${title} · pg-queue</title>
<link rel="stylesheet" href="${ctx.base}/assets/dashboard.css?v=${ASSET_VERSION}">
<script src="${ctx.base}/assets/dashboard.js?v=${ASSET_VERSION}" defer></script>
</head>
<body${refreshing ? html` data-summary="${ctx.base}/api/summary" data-refresh-ms="${ctx.refreshMs}"` : null}${following ? html` data-live-ms="${ctx.refreshMs}"` : null}>
<header>
  <strong class="brand">pg-queue</strong>
  <nav>${nav('overview', '/', 'Overview')}${nav('jobs', '/jobs', 'Jobs')}${nav('flows', '/flows', 'Flows')}${nav('schedules', '/schedules', 'Recurring')}${nav('instances', '/instances', 'Instances')}${nav('events', '/events', 'Events')}</nav>
  ${ctx.databases.length > 1 ? html`<nav class="databases" aria-label="Databases">${ctx.databases.map((d) => html`<a href="${d.base}/"${d.current ? html` aria-current="page"` : null}>${d.name}</a>`)}</nav>` : null}
  ${refreshing || following ? html`<button type="button" class="live-toggle" data-live-toggle aria-pressed="false" hidden>Pause live updates</button>` : null}
  <span class="who">${ctx.user ?? 'anonymous'} · ${ctx.access === 'full' ? 'full access' : 'read-only'}<span class="updated" aria-live="polite"></span></span>
</header>
<main>
${ctx.flash ? html`<p class="flash" role="status">${ctx.flash}</p>` : null}
<h1>${title}</h1>
${body}
</main>
</body>
</html>`.value;
}

/**
 * A POST form with one button, the CSRF token, where to come back to and a confirmation text. Without
 * JavaScript the server answers the first POST with a confirmation page; the script asks with confirm()
 * and marks the form as confirmed. Read-only viewers never get one.
 */
export function actionForm(ctx: PageContext, action: string, label: string, confirm: string, fields: Record<string, string | null> = {}, danger = false): HtmlValue {
  if (!ctx.canAct) return null;
  return html`<form method="post" action="${ctx.base}${action}" class="action" data-confirm="${confirm}">
<input type="hidden" name="_csrf" value="${ctx.csrfToken}"><input type="hidden" name="return" value="${ctx.here}">${Object.entries(fields).map(([k, v]) => (v === null ? null : html`<input type="hidden" name="${k}" value="${v}">`))}
<button type="submit"${danger ? html` class="danger"` : null}>${label}</button></form>`;
}

/** The page a POST without confirmation gets (no JavaScript): what it will do, and a button that does it. */
export function confirmPage(ctx: PageContext, action: string, question: string, fields: Record<string, string | string[]>): string {
  const hidden = Object.entries(fields).flatMap(([k, v]) => (Array.isArray(v) ? v : [v]).map((one) => html`<input type="hidden" name="${k}" value="${one}">`));
  const back = typeof fields.return === 'string' && fields.return ? fields.return : ctx.base + '/';
  const body = html`<p class="confirm-question">${question}</p>
<form method="post" action="${ctx.base}${action}">
<input type="hidden" name="_csrf" value="${ctx.csrfToken}"><input type="hidden" name="confirmed" value="1">${hidden}
<button type="submit" class="danger">Yes, do it</button> <a href="${back}">Cancel</a></form>`;
  return layout(ctx, 'overview', 'Confirm', body);
}

export function errorPage(ctx: PageContext, title: string, message: string): string {
  return layout(ctx, 'overview', title, html`<p class="error">${message}</p><p><a href="${ctx.base}/">Back to the overview</a></p>`);
}
