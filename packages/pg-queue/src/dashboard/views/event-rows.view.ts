import type { EventListRow } from '../../store/dashboard-events.store.js';
import { terminalText } from '../../utils/terminal-text.js';
import { absTime } from './format.js';
import { html, type HtmlValue } from './html.js';
import type { PageContext } from './layout.js';

/** A job's events as its page shows them; null when the event stream's table is missing. */
export interface JobEventsData {
  /** The job's queue records events now (none are read otherwise). */
  recording: boolean;
  /** Oldest first. */
  rows: EventListRow[];
  /** More events were recorded since the job's creation than the read looks at: some may be missing. */
  partial: boolean;
}

/** The event types whose detail is the job's last error: handlers put payload data in errors, so hidePayloads hides it. */
const ERROR_DETAIL = new Set(['failed', 'retrying', 'dead', 'stalled']);

/** An event's detail: a failure's error (its first line; the job page has the whole of it), a flow's final status. */
function detailCell(ctx: PageContext, e: EventListRow): HtmlValue {
  if (ERROR_DETAIL.has(e.type) && ctx.hidePayloads) return html`<span class="muted">hidden (hidePayloads)</span>`;
  if (e.detail === null) return null;
  const text = terminalText(e.detail);
  const line = text.split('\n', 1)[0];
  return html`<span${line.length < text.length ? html` title="the first line; the job's page shows the whole error"` : null}>${line.length > 300 ? `${line.slice(0, 300)}…` : line}</span>`;
}

/** What an event is about: its job (a link), or for flow-finished its flow. */
function subject(ctx: PageContext, e: EventListRow): HtmlValue {
  if (e.job_id !== null) return html`<a href="${ctx.base}/jobs/${e.job_id}">job ${e.job_id}</a>${e.flow_id !== null ? html` <span class="muted">(flow <a href="${ctx.base}/flows/${e.flow_id}">${e.flow_id}</a>)</span>` : null}`;
  return e.flow_id !== null ? html`<a href="${ctx.base}/flows/${e.flow_id}">flow ${e.flow_id}</a>` : '—';
}

/**
 * Recorded events as a table, in the order given: when, type, queue, job (or flow), attempt, detail, and the event's
 * id (the stream's position: QueueService.events({ after }) and `pg-queue events --after` resume from it).
 * On a job's page (`ofOneJob`) the queue and the job go without saying.
 */
export function eventTable(ctx: PageContext, rows: EventListRow[], ofOneJob = false): HtmlValue {
  return html`<table class="events stack" data-field="events"><thead><tr><th>When</th><th>Type</th>${ofOneJob ? null : html`<th>Queue</th><th>Job</th>`}<th>Attempt</th><th>Detail</th><th>Event id</th></tr></thead>
<tbody>${rows.map(
    (e) => html`<tr data-event="${e.id}" data-type="${e.type}"><td data-label="at">${absTime(e.created_at)}</td><td><span class="status event-${e.type}">${e.type}</span></td>${
      ofOneJob ? null : html`<td data-label="queue"><a href="${ctx.base}/queues/${encodeURIComponent(e.queue_name)}">${e.queue_name}</a></td><td data-label="job">${subject(ctx, e)}</td>`
    }<td data-label="attempt">${e.attempt === null ? '—' : String(e.attempt)}</td><td class="full" data-label="detail">${detailCell(ctx, e)}</td><td data-label="id"><code>${e.id}</code></td></tr>`,
  )}</tbody></table>`;
}

/** The job page's events: the job's recorded events, oldest first, or how to have them recorded. */
export function jobEventsBlock(ctx: PageContext, queue: string, events: JobEventsData | null): HtmlValue {
  if (events === null) return null;
  const q = encodeURIComponent(queue);
  if (!events.recording) {
    return html`<h2>Events</h2><p class="muted" data-field="job-events">Queue ${queue} does not record events: <a href="${ctx.base}/queues/${q}#events">its page</a> turns recording on (from then on).</p>`;
  }
  const list = events.rows.length ? eventTable(ctx, events.rows, true) : html`<p class="muted" data-field="job-events">No event of this job is kept (recorded before its queue recorded events, or past the retention).</p>`;
  return html`<h2>Events</h2>
<p class="muted">What the event stream recorded of this job, oldest first (<a href="${ctx.base}/events?queue=${q}">every event of queue ${queue}</a>).${events.partial ? ' Many events were recorded since it was created: the page reads the first and the newest ones, so some in between may be missing.' : ''}</p>
${list}`;
}
