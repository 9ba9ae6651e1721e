import type { JobStatus } from '../../interfaces/job.interface.js';
import type { DashboardAction, JobListRow } from '../../store/dashboard.store.js';
import { ACTION_STATUSES } from '../dashboard-actions.js';
import { formatTime } from './format.js';
import { html, type HtmlValue } from './html.js';
import { bulkQuestion, describeJobs } from './confirm-questions.js';
import { actionForm, layout, type PageContext } from './layout.js';
import { STATUSES } from './overview.view.js';

export interface JobsData {
  queue: string | null;
  status: JobStatus | null;
  search: string | null;
  rows: JobListRow[];
  /** Link to the next (older) page's `before`; null: the end. */
  nextBefore: string | null;
  scanned: { from: string; below: string } | null;
  /** The first page (no `before`). */
  first: boolean;
}

export function statusBadge(status: string): HtmlValue {
  return html`<span class="status status-${status}">${status}</span>`;
}

export function jobsView(ctx: PageContext, d: JobsData): string {
  const query = (extra: Record<string, string | null>) => {
    const params = new URLSearchParams();
    const all = { queue: d.queue, status: d.status, ...extra };
    for (const [k, v] of Object.entries(all)) if (v) params.set(k, v);
    const text = params.toString();
    return `${ctx.base}/jobs${text ? `?${text}` : ''}`;
  };
  const filters = html`<form method="get" action="${ctx.base}/jobs" class="filters">
<label>Queue <input name="queue" value="${d.queue ?? ''}" placeholder="any"></label>
<label>Status <select name="status"><option value="">any</option>${STATUSES.map((s) => html`<option${s === d.status ? html` selected` : null}>${s}</option>`)}</select></label>
<label>Id or unique key <input name="q" value="${d.search ?? ''}" placeholder="1234 or order-42"></label>
<button type="submit">Filter</button> <a href="${ctx.base}/jobs">Clear</a>
</form>`;
  const filterFields = { queue: d.queue, status: d.status };
  const described = describeJobs(d.queue, d.status);
  // Only the actions that can change a job of the filtered status.
  const applies = (action: DashboardAction) => !d.status || ACTION_STATUSES[action].includes(d.status);
  // A status no action changes (blocked: cancel its flow instead) offers no bulk actions at all.
  const bulk =
    ctx.canAct && (d.queue || d.status) && !d.search && (Object.keys(ACTION_STATUSES) as DashboardAction[]).some(applies)
      ? html`<div class="bulk">For all ${described}:
${applies('retry') ? actionForm(ctx, '/jobs/bulk/retry', 'Retry all', bulkQuestion('retry', d.queue, d.status), filterFields) : null}
${applies('run-now') ? actionForm(ctx, '/jobs/bulk/run-now', 'Run all now', bulkQuestion('run-now', d.queue, d.status), filterFields) : null}
${applies('cancel') ? actionForm(ctx, '/jobs/bulk/cancel', 'Cancel all', bulkQuestion('cancel', d.queue, d.status), filterFields, true) : null}
${applies('delete') ? actionForm(ctx, '/jobs/bulk/delete', 'Delete all', bulkQuestion('delete', d.queue, d.status), filterFields, true) : null}
</div>`
      : null;
  const rows = d.rows.map(
    (r) => html`<tr data-job="${r.id}">
<td><a href="${ctx.base}/jobs/${r.id}">${r.id}</a></td><td>${r.queue_name}</td><td>${statusBadge(r.status)}</td>
<td class="n">${r.attempts}/${r.max_attempts}</td><td>${formatTime(r.run_at)}</td><td>${formatTime(r.finished_at)}</td>
<td>${r.unique_key ?? ''}</td>
<td>${ctx.hidePayloads ? html`<span class="muted">hidden</span>` : html`<code>${r.payload_preview ?? ''}</code>`}</td>
<td class="muted">${ctx.hidePayloads && r.last_error ? 'hidden' : (r.last_error ?? '')}</td></tr>`,
  );
  const pager = d.search
    ? null
    : html`<div class="pager">${d.first ? null : html`<a href="${query({})}">« Newest</a>`}
${d.nextBefore ? html`<a href="${query({ before: d.nextBefore })}" rel="next">Older »</a>` : html`<span class="muted">No older jobs.</span>`}
${d.scanned ? html`<span class="muted">ids ${d.scanned.from} to ${BigInt(d.scanned.below) - 1n} looked at${d.rows.length === 0 ? ': none matched, go on with Older' : ''}</span>` : null}</div>`;
  const body = html`${filters}${bulk}
<table class="jobs"><thead><tr><th>Id</th><th>Queue</th><th>Status</th><th class="n">Attempts</th><th>Run at</th><th>Finished</th><th>Unique key</th><th>Payload</th><th>Last error</th></tr></thead>
<tbody>${d.rows.length ? rows : html`<tr><td colspan="9" class="muted">No matching jobs${d.search ? '' : ' in this range of ids'}.</td></tr>`}</tbody></table>
${pager}`;
  return layout(ctx, 'jobs', 'Jobs', body);
}
