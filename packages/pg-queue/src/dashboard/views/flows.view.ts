import { FLOW_STATUSES, type FlowStatus } from '../../flows/flow.interfaces.js';
import { FLOW_JOB_COUNT_CAP, type FlowListRow } from '../../store/dashboard.store.js';
import { absTime, formatCount } from './format.js';
import { html, type HtmlValue } from './html.js';
import { statusBadge } from './jobs.view.js';
import { layout, type PageContext } from './layout.js';

export interface FlowsData {
  status: FlowStatus | null;
  rows: FlowListRow[];
  /** Link to the next (older) page's `before`; null: the end. */
  nextBefore: string | null;
  scanned: { from: string; below: string };
  /** The first page (no `before`). */
  first: boolean;
}

/** A flow's job count as the list reads it: counted up to FLOW_JOB_COUNT_CAP, "over" past it. */
export function flowJobCount(n: number): HtmlValue {
  return n > FLOW_JOB_COUNT_CAP ? html`<span title="counted up to ${formatCount(FLOW_JOB_COUNT_CAP)}">over ${formatCount(FLOW_JOB_COUNT_CAP)}</span>` : formatCount(n);
}

export function flowsView(ctx: PageContext, d: FlowsData): string {
  const query = (extra: Record<string, string | null>) => {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries({ status: d.status, ...extra })) if (v) params.set(k, v);
    const text = params.toString();
    return `${ctx.base}/flows${text ? `?${text}` : ''}`;
  };
  const filters = html`<form method="get" action="${ctx.base}/flows" class="filters">
<label>Status <select name="status"><option value="">any</option>${FLOW_STATUSES.map((s) => html`<option${s === d.status ? html` selected` : null}>${s}</option>`)}</select></label>
<button type="submit">Filter</button> <a href="${ctx.base}/flows">Clear</a>
</form>`;
  const rows = d.rows.map(
    (f) => html`<tr data-flow="${f.id}">
<td data-label="Flow"><a href="${ctx.base}/flows/${f.id}">${f.id}</a></td><td class="full">${f.name === null ? html`<span class="muted">—</span>` : html`<a href="${ctx.base}/flows/${f.id}">${f.name}</a>`}</td>
<td>${statusBadge(f.status)}</td><td class="n" data-label="Jobs">${flowJobCount(f.jobs)}</td><td data-label="Created">${absTime(f.created_at)}</td><td data-label="Finished">${absTime(f.finished_at)}</td>
<td class="muted full">${f.reason ?? ''}</td></tr>`,
  );
  const pager = html`<div class="pager">${d.first ? null : html`<a href="${query({})}">« Newest</a>`}
${d.nextBefore ? html`<a href="${query({ before: d.nextBefore })}" rel="next">Older »</a>` : html`<span class="muted">No older flows.</span>`}
<span class="muted">flow ids ${d.scanned.from} to ${BigInt(d.scanned.below) - 1n} looked at${d.rows.length === 0 ? ': none matched, go on with Older' : ''}</span></div>`;
  const body = html`${filters}
<table class="flows stack"><thead><tr><th>Id</th><th>Name</th><th>Status</th><th class="n">Jobs</th><th>Created</th><th>Finished</th><th>Reason</th></tr></thead>
<tbody>${d.rows.length ? rows : html`<tr><td colspan="7" class="muted">No matching flows in this range of ids.</td></tr>`}</tbody></table>
${pager}`;
  return layout(ctx, 'flows', 'Flows', body);
}
