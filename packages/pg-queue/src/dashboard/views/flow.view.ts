import { FLOW_JOB_COUNT_CAP, type FlowHeader, type FlowJobRow } from '../../store/dashboard.store.js';
import { flowQuestion } from './confirm-questions.js';
import { flowGraph, waitingText, type FlowDrawing } from './flow-graph.js';
import { absTime, formatCount } from './format.js';
import { html, type HtmlValue } from './html.js';
import { statusBadge } from './jobs.view.js';
import { actionForm, layout, type PageContext } from './layout.js';
import { STATUSES } from './overview.view.js';

export interface FlowData {
  flow: FlowHeader;
  drawing: FlowDrawing;
  /** One page of the jobs table, by id after `after`. */
  page: { rows: FlowJobRow[]; after: string; nextAfter: string | null };
}

export function flowTitle(flow: { id: string; name: string | null }): string {
  return flow.name === null ? `Flow ${flow.id}` : `Flow ${flow.id}: ${flow.name}`;
}

/** What a job of the flow's table says beside its status: what a blocked one waits for, what a compensation undoes. */
function relation(ctx: PageContext, job: FlowJobRow): HtmlValue {
  if (job.status === 'blocked' && job.waiting_for) return html`<span data-field="waiting_for">waiting for ${waitingText(job.waiting_for, job.waiting)}</span>`;
  if (job.compensates) return html`↺ undoes <a href="${ctx.base}/jobs/${job.compensates}">job ${job.compensates}</a>`;
  return null;
}

export function flowView(ctx: PageContext, d: FlowData): string {
  const { flow } = d;
  const unfinished = flow.finished_at === null;
  const action = unfinished ? actionForm(ctx, `/flows/${flow.id}/cancel`, 'Cancel flow', flowQuestion(flow.id, flow.name), {}, true) : null;
  const counts = STATUSES.filter((s) => (flow.counts[s] ?? 0) > 0).map((s) => html`<li>${statusBadge(s)} ${formatCount(flow.counts[s]!)}</li>`);
  const rows = d.page.rows.map(
    (j) => html`<tr data-job="${j.id}">
<td data-label="Job"><a href="${ctx.base}/jobs/${j.id}">${j.id}</a></td><td data-label="Ref">${j.ref ?? ''}</td><td data-label="Queue">${j.queue_name}</td><td>${statusBadge(j.status)}</td>
<td class="full">${relation(ctx, j)}</td><td class="n" data-label="Attempts">${j.attempts}/${j.max_attempts}</td><td data-label="Run at">${absTime(j.run_at)}</td><td data-label="Finished">${absTime(j.finished_at)}</td>
<td class="muted error-cell">${ctx.hidePayloads && j.last_error ? 'hidden' : (j.last_error ?? '')}</td></tr>`,
  );
  const here = `${ctx.base}/flows/${flow.id}`;
  const pager = html`<div class="pager">${d.page.after === '0' ? null : html`<a href="${here}">« First jobs</a>`}
${d.page.nextAfter ? html`<a href="${here}?after=${d.page.nextAfter}" rel="next">Next jobs »</a>` : html`<span class="muted">No more jobs.</span>`}</div>`;
  const body = html`<p>${statusBadge(flow.status)} ${action}</p>
<dl class="fields">
<dt>Name</dt><dd data-field="name">${flow.name ?? '—'}</dd>
<dt>Reason</dt><dd data-field="reason">${flow.reason ?? '—'}${flow.failed_job_id ? html` (<a href="${ctx.base}/jobs/${flow.failed_job_id}">job ${flow.failed_job_id}</a>)` : null}</dd>
<dt>Created</dt><dd>${absTime(flow.created_at)}</dd>
<dt>Last changed</dt><dd>${absTime(flow.updated_at)}</dd>
<dt>Finished</dt><dd>${absTime(flow.finished_at)}</dd>
<dt>Jobs</dt><dd><ul class="counts">${counts.length ? counts : html`<li class="muted">none left</li>`}</ul>${flow.capped ? html` <span class="muted">(counted over its first ${formatCount(FLOW_JOB_COUNT_CAP)} jobs: more may be in each status)</span>` : null}</dd>
</dl>
<h2>Dependencies</h2>
${flowGraph(ctx.base, d.drawing)}
<h2>Jobs</h2>
<table class="jobs stack"><thead><tr><th>Id</th><th>Ref</th><th>Queue</th><th>Status</th><th>Waits for / undoes</th><th class="n">Attempts</th><th>Run at</th><th>Finished</th><th>Last error</th></tr></thead>
<tbody>${rows.length ? rows : html`<tr><td colspan="9" class="muted">No jobs${d.page.after === '0' ? '' : ' after this one'}.</td></tr>`}</tbody></table>
${pager}`;
  return layout(ctx, 'flows', flowTitle(flow), body);
}
