import type { LimitInForce, QueueLimits } from '../../limits/queue-limits.js';
import { html, type HtmlValue } from './html.js';
import type { PageContext } from './layout.js';

/** The question a change of a queue's limits asks before it is stored. */
export function limitsQuestion(queue: string): string {
  return `Change the limits of queue ${queue}? Every process applies them within a second; running jobs are not stopped.`;
}

/** A limit as the page shows it: its value and where it comes from. */
function shown<T>(limit: LimitInForce<T>, text: (value: T) => string): string {
  if (limit.value === undefined) return "the decorator's (not known to this process)";
  const value = limit.value === 'none' ? 'none' : text(limit.value);
  return limit.source === 'database' ? `${value} (set at runtime)` : `${value} (the decorator's)`;
}

/** What a field of the form holds: the override set at runtime ('none' or its value), empty for the decorator's. */
function prefill<T>(limit: LimitInForce<T>, text: (value: T) => string): string {
  if (limit.source !== 'database' || limit.value === undefined) return '';
  return limit.value === 'none' ? 'none' : text(limit.value);
}

/**
 * The queue page's limits section: the limits in force and where each comes from, its blocks by a partner's 429, and
 * (with full access) a form that changes them at runtime (POST queues/:name/limits: CSRF-checked and confirmed, as every
 * action).
 */
export function queueLimitsSection(ctx: PageContext, limits: QueueLimits): HtmlValue {
  const rate = (r: { max: number; intervalMs: number }) => `${r.max}/${r.intervalMs}`;
  const rows: [string, string, string, string, string][] = [
    ['concurrency', 'jobs at once in each process', shown(limits.concurrency, String), 'concurrency', prefill(limits.concurrency, String)],
    ['globalConcurrency', 'jobs at once in all processes', shown(limits.globalConcurrency, String), 'global', prefill(limits.globalConcurrency, String)],
    ['rateLimit', 'starts per window: max/intervalMs', shown(limits.rateLimit, (r) => `${rate(r)} ms`), 'rate', prefill(limits.rateLimit, rate)],
    ['concurrencyPerKey', 'jobs of one concurrency key at once', shown(limits.concurrencyPerKey, String), 'perKey', prefill(limits.concurrencyPerKey, String)],
  ];
  const blocked = limits.blockedForMs > 0 || limits.keysBlockedForMs > 0;
  const form = ctx.canAct
    ? html`<form method="post" action="${ctx.base}/queues/${encodeURIComponent(limits.queue)}/limits" class="limits" data-confirm="${limitsQuestion(limits.queue)}">
<input type="hidden" name="_csrf" value="${ctx.csrfToken}"><input type="hidden" name="return" value="${ctx.here}">
${rows.map(([name, , , field, value]) => html`<label>${name} <input name="${field}" value="${value}" size="12" autocomplete="off"></label> `)}
<button type="submit">Save limits</button>
<p class="muted">Empty: the decorator's value. <code>none</code>: no such limit (not for concurrency). A rate is <code>max/intervalMs</code>, e.g. <code>100/1000</code>.</p>
</form>`
    : null;
  return html`<section id="limits" data-slot="limits"><h2>Limits</h2>
<table class="limits stack"><thead><tr><th>Limit</th><th>What</th><th>In force</th></tr></thead>
<tbody>${rows.map(([name, what, value]) => html`<tr><th scope="row">${name}</th><td data-label="what">${what}</td><td data-limit="${name}" data-label="in force">${value}</td></tr>`)}</tbody></table>
${blocked ? html`<p class="paused" data-blocked="${limits.queue}">Rate limited by a partner (RateLimitedError): ${limits.blockedForMs > 0 ? `no job starts for ${String(limits.blockedForMs)} ms more` : `a concurrency key is blocked for up to ${String(limits.keysBlockedForMs)} ms more`}.</p>` : null}
${form}</section>`;
}
