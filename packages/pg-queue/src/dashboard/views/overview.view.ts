import type { JobStatus } from '../../interfaces/job.interface.js';
import { DASHBOARD_EXACT_LIMIT } from '../../store/dashboard.store.js';
import { throughputChart, type MinuteBucket } from './chart.js';
import { formatCount, formatDuration } from './format.js';
import { html } from './html.js';
import { queueQuestion } from './confirm-questions.js';
import { actionForm, layout, type PageContext } from './layout.js';
import type { ListedStatus } from '../listed-status.js';

export type { ListedStatus } from '../listed-status.js';


/** A queue's counts by listed status; `approximate`: the estimated ones. */
export type DashboardCounts = Record<ListedStatus, number> & { approximate?: ListedStatus[] };

/** The overview's columns: queued jobs as due (run_at reached) and scheduled (run_at ahead), apart. */
const COLUMNS: ListedStatus[] = ['due', 'scheduled', 'blocked', 'processing', 'completed', 'failed', 'cancelled'];

/** What each column's head says it counts (a tooltip). */
const COLUMN_TITLES: Partial<Record<ListedStatus, string>> = {
  due: 'queued jobs whose time has come: they run as soon as a worker is free (read-ahead ones included)',
  scheduled: 'queued jobs that wait for a later run_at (delayed, retry backoff, snoozed)',
  blocked: 'jobs of a flow waiting for their parents',
  processing: 'jobs a worker runs now',
};

export interface QueueOverview {
  name: string;
  counts: DashboardCounts;
  /** ms the oldest due job has waited; null when none is due. */
  oldestDueMs: number | null;
  paused: boolean;
  /** A live instance has a handler for it (the instances registry). */
  served: boolean;
  /** Live instances serving it that have not claimed it for their bound while it has due jobs (a wedged claim loop). */
  stalledBy: string[];
  /** The last 60 minutes, oldest first. */
  minutes: MinuteBucket[];
}

export interface OverviewData {
  queues: QueueOverview[];
  /** The chart read its row cap for a status: older minutes may be missing. */
  chartCapped: boolean;
}

/** Every job status, as the overview's columns, the jobs list's filter and the flow page's counts show them. */
export const STATUSES: JobStatus[] = ['queued', 'blocked', 'processing', 'completed', 'failed', 'cancelled'];

/** The jobs list's status filter: queued jobs as a whole, or their due or scheduled part. */
export const LISTED_STATUSES: ListedStatus[] = ['queued', 'due', 'scheduled', 'blocked', 'processing', 'completed', 'failed', 'cancelled'];

export function overviewView(ctx: PageContext, data: OverviewData): string {
  const count = (q: QueueOverview, status: ListedStatus) => {
    const approx = q.counts.approximate?.includes(status) ?? false;
    return html`<td class="n" data-label="${status}"><a href="${ctx.base}/jobs?queue=${encodeURIComponent(q.name)}&amp;status=${status}" data-count="${q.name}|${status}"${approx ? html` class="approx" title="an estimate"` : null}>${approx ? '≈' : ''}${formatCount(q.counts[status])}</a></td>`;
  };
  const rows = data.queues.map(
    (q) => html`<tr data-queue="${q.name}">
  <th scope="row"><a href="${ctx.base}/queues/${encodeURIComponent(q.name)}" data-queue-link="${q.name}">${q.name}</a></th>
  ${COLUMNS.map((s) => count(q, s))}
  <td class="n" data-oldest="${q.name}" data-label="oldest due waits">${formatDuration(q.oldestDueMs)}</td>
  <td>${q.paused ? html`<span class="paused">paused</span>` : 'running'}${!q.served && q.counts.queued > 0 ? html` <a class="unserved" href="${ctx.base}/instances" data-unserved="${q.name}">nobody runs this queue</a>` : null}${q.stalledBy.length > 0 ? html` <a class="unserved" href="${ctx.base}/instances" data-stalled="${q.name}" title="${q.stalledBy.join(', ')}">${String(q.stalledBy.length)} instance(s) not claiming</a>` : null}</td>
  <td>${q.paused
      ? actionForm(ctx, `/queues/${encodeURIComponent(q.name)}/resume`, 'Resume', queueQuestion('resume', q.name))
      : actionForm(ctx, `/queues/${encodeURIComponent(q.name)}/pause`, 'Pause', queueQuestion('pause', q.name))}</td>
</tr>`,
  );
  const body = html`<div class="scroll"><table class="queues stack">
<thead><tr><th>Queue</th>${COLUMNS.map((s) => html`<th class="n"${COLUMN_TITLES[s] ? html` title="${COLUMN_TITLES[s]!}"` : null}>${s}</th>`)}<th class="n">Oldest due waits</th><th>State</th><th></th></tr></thead>
<tbody>${data.queues.length ? rows : html`<tr><td colspan="${COLUMNS.length + 4}" class="muted">No jobs yet.</td></tr>`}</tbody>
</table></div>
<p class="muted">Queued jobs show as <em>due</em> (their time has come; they start as soon as a worker is free) and <em>scheduled</em> (they wait for a later time).
Counts are exact up to ${formatCount(DASHBOARD_EXACT_LIMIT)} per queue and status and estimated above (≈). Throughput comes from the finish
time of the finished jobs the pruner has kept: with a retention under an hour, older minutes show fewer jobs.${data.chartCapped ? ' The chart read its cap of finished rows: older minutes are missing.' : ''}</p>
<h2>Last hour</h2>
<div class="cards">${data.queues.map((q) => html`<section class="card"><h3>${q.name}</h3>${throughputChart(q.name, q.minutes)}</section>`)}</div>`;
  return layout(ctx, 'overview', 'Queues', body, { refresh: true });
}
