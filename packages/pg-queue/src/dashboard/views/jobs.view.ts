import type { DashboardAction, JobListRow } from '../../store/dashboard.store.js';
import type { JobListOrder } from '../../store/job-list-order.js';
import { actionStatuses } from '../dashboard-actions.js';
import { formatSpan, timeCell } from './format.js';
import { html, type HtmlValue } from './html.js';
import { bulkQuestion, selectedQuestion } from './confirm-questions.js';
import { actionForm, layout, type PageContext } from './layout.js';
import { LISTED_STATUSES, type ListedStatus } from './overview.view.js';

export interface JobsData {
  queue: string | null;
  status: ListedStatus | null;
  /** An id or a unique key looked up. */
  search: string | null;
  /** Text searched for in payloads and errors (null: none, or hidePayloads). */
  text: string | null;
  /** Newest first (the default, as `pg-queue jobs list`) or oldest first (job-list-order.ts). */
  order: JobListOrder;
  rows: JobListRow[];
  /** Newest first: link to the next (older) page's `before`; null: the end. */
  nextBefore: string | null;
  /** Oldest first: link to the next (newer) page's `after`; null: the end. */
  nextAfter: string | null;
  scanned: { from: string; below: string } | null;
  /** The text search ran out of its time before it filled the page. */
  stoppedEarly: boolean;
  /** The first page (no `before` or `after`). */
  first: boolean;
}

export function statusBadge(status: string): HtmlValue {
  return html`<span class="status status-${status}">${status}</span>`;
}

/** A row's status as the list shows it: a queued job is due (its time has come) or scheduled (it waits for a later one). */
export function listedStatus(row: { status: string; run_at: Date | string; now: Date | string }): string {
  if (row.status !== 'queued') return row.status;
  return new Date(row.run_at).getTime() > new Date(row.now).getTime() ? 'scheduled' : 'due';
}

/** How long the job ran (its last attempt, claim to finish) or has been running; '' when neither applies. */
function took(r: JobListRow): string {
  if (!r.locked_at) return '';
  const start = new Date(r.locked_at).getTime();
  if (r.status === 'processing') return `running ${formatSpan(new Date(r.now).getTime() - start)}`;
  if (r.finished_at && r.status !== 'cancelled') return formatSpan(new Date(r.finished_at).getTime() - start);
  return '';
}

/**
 * The first line of last_error. It is kept through retries until an attempt fails again, so only a failed job's is its
 * last word: on any other job it is labelled as an earlier attempt's (a completed job did not fail).
 */
function errorCell(ctx: PageContext, r: JobListRow): HtmlValue {
  if (!r.last_error) return '';
  const text = ctx.hidePayloads ? 'hidden' : r.last_error;
  if (r.status === 'failed') return text;
  return html`<span class="earlier" data-earlier-error>earlier attempt:</span> ${text}`;
}

const ACTIONS: { action: DashboardAction; label: string; danger: boolean }[] = [
  { action: 'retry', label: 'Retry', danger: false },
  { action: 'run-now', label: 'Run now', danger: false },
  { action: 'cancel', label: 'Cancel', danger: true },
  { action: 'delete', label: 'Delete', danger: true },
];

export function jobsView(ctx: PageContext, d: JobsData): string {
  const query = (extra: Record<string, string | null>) => {
    const params = new URLSearchParams();
    const all = { queue: d.queue, status: d.status, text: d.text, order: d.order === 'oldest' ? 'oldest' : null, ...extra };
    for (const [k, v] of Object.entries(all)) if (v) params.set(k, v);
    const text = params.toString();
    return `${ctx.base}/jobs${text ? `?${text}` : ''}`;
  };
  const filters = html`<form method="get" action="${ctx.base}/jobs" class="filters">
<label>Queue <input name="queue" value="${d.queue ?? ''}" placeholder="any"></label>
<label>Status <select name="status"><option value="">any</option>${LISTED_STATUSES.map((s) => html`<option${s === d.status ? html` selected` : null}>${s}</option>`)}</select></label>
${ctx.hidePayloads ? null : html`<label>Payload or error contains <input name="text" value="${d.text ?? ''}" placeholder="order-42 or timeout"></label>`}
<label>Id or unique key <input name="q" value="${d.search ?? ''}" placeholder="1234 or order-42"></label>
<label>Order <select name="order"><option value="">newest first</option><option value="oldest"${d.order === 'oldest' ? html` selected` : null}>oldest first</option></select></label>
<button type="submit">Filter</button> <a href="${ctx.base}/jobs">Clear</a>
${ctx.canAct ? html` <a href="${ctx.base}/jobs/new${d.queue ? `?queue=${encodeURIComponent(d.queue)}` : ''}" data-add-job>Add a job</a>` : null}
</form>`;
  const filterFields = { queue: d.queue, status: d.status };
  const applies = (action: DashboardAction) => actionStatuses(action, d.status).length > 0;
  // "For all" acts on the whole filter (not on a text search's matches: those are the page's, selected below). A
  // status no action changes (blocked: cancel its flow instead) offers none.
  const bulk =
    ctx.canAct && (d.queue || d.status) && !d.search && !d.text && ACTIONS.some((a) => applies(a.action))
      ? html`<div class="bulk">All ${d.status ?? ''} jobs ${d.queue ? html`of queue <strong>${d.queue}</strong>` : 'of every queue'}:
${ACTIONS.filter((a) => applies(a.action)).map((a) => actionForm(ctx, `/jobs/bulk/${a.action}`, `${a.label === 'Run now' ? 'Run all now' : `${a.label} all`}`, bulkQuestion(a.action, d.queue, d.status), filterFields, a.danger))}
</div>`
      : null;
  // The selection: a checkbox per row, tied to this form by its id, so the table stays outside it.
  const selectable = ctx.canAct && d.rows.length > 0;
  const selection = selectable
    ? html`<form method="post" id="selected" class="selection" data-selection>
<input type="hidden" name="_csrf" value="${ctx.csrfToken}"><input type="hidden" name="return" value="${ctx.here}">
<span class="selected-count" aria-live="polite">Selected jobs:</span>
${ACTIONS.map((a) => html`<button type="submit" formaction="${ctx.base}/jobs/selected/${a.action}" data-confirm="${selectedQuestion(a.action, null)}"${a.danger ? html` class="danger"` : null}>${a.label === 'Run now' ? 'Run selected now' : `${a.label} selected`}</button> `)}
</form>`
    : null;
  const rows = d.rows.map((r) => {
    const shown = listedStatus(r);
    return html`<tr data-job="${r.id}">
${selectable ? html`<td class="pick"><input type="checkbox" name="id" value="${r.id}" form="selected" aria-label="Select job ${r.id}"></td>` : null}
<td data-label="Job"><a href="${ctx.base}/jobs/${r.id}">${r.id}</a></td><td data-label="Queue">${r.queue_name}</td><td>${statusBadge(shown)}</td>
<td class="n" data-label="Attempts">${r.attempts}/${r.max_attempts}</td><td class="when" data-label="Run at">${timeCell(r.run_at, r.now)}</td><td class="when" data-label="Finished">${timeCell(r.finished_at, r.now)}</td><td class="n" data-label="Took">${took(r)}</td>
<td class="wide">${r.unique_key ?? ''}</td>
<td class="wide">${ctx.hidePayloads ? html`<span class="muted">hidden</span>` : html`<code>${r.payload_preview ?? ''}</code>`}</td>
<td class="muted error-cell">${errorCell(ctx, r)}</td></tr>`;
  });
  const scannedText = d.scanned
    ? html`<span class="muted" data-scanned>ids ${d.scanned.from} to ${BigInt(d.scanned.below) - 1n} ${d.text ? 'searched' : 'looked at'}${d.rows.length === 0 && (d.nextBefore ?? d.nextAfter) ? `: none matched, go on with ${d.order === 'oldest' ? 'Newer' : 'Older'}` : ''}</span>`
    : null;
  const stopped = d.stoppedEarly
    ? html`<p class="warning" data-stopped-early>The search stopped early: it used up the dashboard's statement timeout. What it found so far is below; <a href="${query({ before: d.nextBefore })}">go on with older jobs</a>, or narrow it by queue or status.</p>`
    : null;
  const pager = d.search
    ? null
    : d.order === 'oldest'
      ? html`<div class="pager" data-live="pager">${d.first ? null : html`<a href="${query({})}">« Oldest</a>`}
${d.nextAfter ? html`<a href="${query({ after: d.nextAfter })}" rel="next">Newer »</a>` : html`<span class="muted">No newer jobs.</span>`}
${scannedText}</div>`
      : html`<div class="pager" data-live="pager">${d.first ? null : html`<a href="${query({})}">« Newest</a>`}
${d.nextBefore ? html`<a href="${query({ before: d.nextBefore })}" rel="next">Older »</a>` : html`<span class="muted">No older jobs.</span>`}
${scannedText}</div>`;
  const columns = 10 + (selectable ? 1 : 0);
  const body = html`${filters}${bulk}${stopped}${selection}
<div class="scroll"><table class="jobs stack"><thead><tr>${selectable ? html`<th class="pick"><input type="checkbox" class="select-all" aria-label="Select every job on this page" hidden></th>` : null}<th>Id</th><th>Queue</th><th>Status</th><th class="n">Attempts</th><th title="when it runs, or ran">Run at</th><th>Finished</th><th class="n" title="its last attempt, from claim to finish">Took</th><th class="wide">Unique key</th><th class="wide">Payload</th><th>Last error</th></tr></thead>
<tbody data-live="rows">${d.rows.length ? rows : html`<tr><td colspan="${columns}" class="muted">No matching jobs${d.search ? '' : ' in this range of ids'}.</td></tr>`}</tbody></table></div>
${pager}`;
  // The first page follows the table (new jobs appear, statuses change); an older page or a text search (which reads
  // up to the statement timeout) does not.
  return layout(ctx, 'jobs', 'Jobs', body, { live: d.first && !d.text && !d.search });
}
