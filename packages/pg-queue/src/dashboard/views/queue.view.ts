import type { DashboardAction, QueueTimes } from '../../store/dashboard.store.js';
import type { InstanceRecord } from '../../store/instance.store.js';
import { bulkQuestion, queueQuestion } from './confirm-questions.js';
import { absTime, formatCount, formatDuration } from './format.js';
import { html, type HtmlValue } from './html.js';
import { instanceAnchor } from './instances.view.js';
import { actionForm, layout, type PageContext } from './layout.js';
import type { DashboardCounts, ListedStatus } from './overview.view.js';
import { DAY_SPAN, HOUR_SPAN, percentileLines, throughputBars, type Span } from './queue-charts.js';
import { queueLimitsSection } from './queue-limits.view.js';
import type { QueueLimits } from '../../limits/queue-limits.js';
import { queueEventsSection, type QueueEventsState } from './queue-events.view.js';
import { queueWeightsSection, type QueueWeights } from './queue-weights.view.js';

export interface QueueData {
  name: string;
  /** null: the queue holds no job. */
  counts: DashboardCounts | null;
  paused: boolean;
  /** ms its oldest due job has waited; null when none is due. */
  oldestDueMs: number | null;
  /** The registered instances with a handler for it (live and gone). */
  instances: InstanceRecord[];
  times: QueueTimes;
  /** Its limits in force (the decorator's, or changed at runtime) and its blocks. */
  limits: QueueLimits;
  /** Whether it records events (the event stream). */
  events: QueueEventsState;
  /** Its fair share weights; null: not a fair queue (no fairness option here, no fair claim or stored weight seen). */
  weights: QueueWeights | null;
}

const SHOWN: ListedStatus[] = ['due', 'scheduled', 'blocked', 'processing', 'completed', 'failed', 'cancelled'];

/** The actions by filter the page offers, each on one status, with its button's words. */
const BULK: { action: DashboardAction; status: ListedStatus; label: string; danger: boolean }[] = [
  { action: 'retry', status: 'failed', label: 'Retry', danger: false },
  { action: 'retry', status: 'cancelled', label: 'Retry', danger: false },
  { action: 'run-now', status: 'scheduled', label: 'Run now', danger: false },
  { action: 'cancel', status: 'queued', label: 'Cancel', danger: true },
  { action: 'delete', status: 'completed', label: 'Delete', danger: true },
  { action: 'delete', status: 'failed', label: 'Delete', danger: true },
  { action: 'delete', status: 'cancelled', label: 'Delete', danger: true },
];

function countOf(counts: DashboardCounts, status: ListedStatus): { n: number; approx: boolean } {
  return { n: counts[status], approx: counts.approximate?.includes(status) ?? false };
}

/** A count the summary poll keeps up to date (data-count), "≈" when estimated. */
function liveCount(queue: string, counts: DashboardCounts, status: ListedStatus): HtmlValue {
  const { n, approx } = countOf(counts, status);
  return html`<span data-count="${queue}|${status}"${approx ? html` class="approx" title="an estimate"` : null}>${approx ? '≈' : ''}${formatCount(n)}</span>`;
}

function charts(d: QueueData, title: string, buckets: QueueData['times']['hour'], span: Span): HtmlValue {
  return html`<h2>${title}</h2>
<div class="cards" data-field="charts-${span === HOUR_SPAN ? 'hour' : 'day'}">
<section class="card"><h3>Throughput</h3>${throughputBars(d.name, buckets, span)}</section>
<section class="card"><h3>Wait time <span class="muted">(due to start)</span></h3>${percentileLines(d.name, 'wait', buckets, span, (b) => b.waitP50, (b) => b.waitP95)}</section>
<section class="card"><h3>Run time <span class="muted">(start to finish)</span></h3>${percentileLines(d.name, 'run time', buckets, span, (b) => b.runP50, (b) => b.runP95)}</section>
</div>`;
}

export function queueView(ctx: PageContext, d: QueueData): string {
  const q = encodeURIComponent(d.name);
  const toggle = d.paused
    ? actionForm(ctx, `/queues/${q}/resume`, 'Resume', queueQuestion('resume', d.name))
    : actionForm(ctx, `/queues/${q}/pause`, 'Pause', queueQuestion('pause', d.name));
  const live = d.instances.filter((i) => i.live);
  const state = html`<div data-field="queue-state" class="queue-state">${d.paused ? html`<span class="paused">paused</span>: no new job starts on any instance` : 'running'} ${toggle}
${live.length === 0 && (d.counts?.queued ?? 0) > 0 ? html` <a class="unserved" href="${ctx.base}/instances">nobody runs this queue</a>` : null}
${d.oldestDueMs !== null ? html` <span class="muted">· the oldest due job has waited ${formatDuration(d.oldestDueMs)}</span>` : null}</div>`;
  const counts = d.counts
    ? html`<ul class="counts" data-field="counts">${SHOWN.map((s) => html`<li><a href="${ctx.base}/jobs?queue=${q}&amp;status=${s}">${s}</a>: ${liveCount(d.name, d.counts!, s)}</li>`)}</ul>`
    : html`<p class="muted">No job of this queue in the table.</p>`;
  // Each action by filter shows how many jobs it would change now, and asks again with that count before it runs.
  const bulk = ctx.canAct && d.counts
    ? BULK.filter((b) => countOf(d.counts!, b.status).n > 0).map((b) => {
        const { n, approx } = countOf(d.counts!, b.status);
        const count = `${approx ? 'about ' : ''}${formatCount(n)}`;
        const question = `${count} ${b.status} job${n === 1 ? '' : 's'} now. ${bulkQuestion(b.action, d.name, b.status)}`;
        return actionForm(ctx, `/jobs/bulk/${b.action}`, `${b.label} ${count} ${b.status}`, question, { queue: d.name, status: b.status }, b.danger);
      })
    : [];
  const instances = d.instances.length
    ? html`<table class="instances stack" data-field="instances"><thead><tr><th>Instance</th><th>Running</th><th>Started</th><th>State</th></tr></thead><tbody>${d.instances.map((i) => {
        const mine = i.queues.find((x) => x.queue === d.name)!;
        return html`<tr data-instance="${i.id}"><th scope="row"><a href="${ctx.base}/instances#${instanceAnchor(i.id)}"><code>${i.id}</code></a></th><td data-label="running">${String(mine.running)}/${String(mine.concurrency)}</td><td data-label="started">${absTime(i.startedAt)}</td><td>${i.live ? 'live' : html`<span class="paused">gone</span>`}</td></tr>`;
      })}</tbody></table>`
    : html`<p class="muted" data-field="instances">No registered instance has a handler for this queue.</p>`;
  const body = html`${state}
${counts}
${queueLimitsSection(ctx, d.limits)}
${d.weights ? queueWeightsSection(ctx, d.name, d.weights) : null}
${queueEventsSection(ctx, d.name, d.events)}
${bulk.length ? html`<h2>Act on this queue's jobs</h2><div class="bulk" data-field="bulk">${bulk}</div><p class="muted">Each button names how many jobs its filter holds now and asks before it runs; it changes the jobs the filter holds when it runs (<a href="${ctx.base}/jobs?queue=${q}">pick jobs one by one</a> in the list).</p>` : null}
${charts(d, 'Last hour', d.times.hour, HOUR_SPAN)}
${charts(d, 'Last day', d.times.day, DAY_SPAN)}
<p class="muted">From the finished jobs the pruner has kept (and history, if enabled): a job's last attempt, its wait from due (run_at) to start and its run from start to finish; p50 is the median, p95 the time 95 % of jobs stayed under.${d.times.capped ? ' The charts read their cap of finished rows: older buckets are missing.' : ''}</p>
<h2>Instances</h2>
${instances}`;
  return layout(ctx, 'overview', `Queue ${d.name}`, body, { refresh: true });
}
