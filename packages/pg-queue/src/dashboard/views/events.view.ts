import { QUEUE_EVENT_TYPES, type QueueEventType } from '../../events/queue-event.interface.js';
import type { EventListRow } from '../../store/dashboard-events.store.js';
import { eventTable } from './event-rows.view.js';
import { formatCount } from './format.js';
import { html } from './html.js';
import { layout, type PageContext } from './layout.js';

export interface EventsData {
  /** The JobEvents migration has run (else there is no table to read). */
  installed: boolean;
  /** The queues that record events now. */
  recording: string[];
  queue: string | null;
  type: QueueEventType | null;
  /** Newest first. */
  rows: EventListRow[];
  /** The Newer link's `after` (null: this page reaches the newest); the Older link's `before` (null: the oldest kept). */
  newer: string | null;
  older: string | null;
  /** The most events one page looks at (a filter that matches little stops there and offers to go on). */
  window: number;
}

/** The page's URL with its filters and one cursor. */
function pageUrl(ctx: PageContext, d: EventsData, cursor: Record<string, string>): string {
  const params = new URLSearchParams({ ...(d.queue ? { queue: d.queue } : {}), ...(d.type ? { type: d.type } : {}), ...cursor });
  return `${ctx.base}/events?${params.toString()}`;
}

/**
 * The recorded event stream (README: "Event stream"): background_job_events newest first, filtered by queue and type,
 * each event linking to its job, paged by event id (Older: `before`, Newer: `after`).
 */
export function eventsView(ctx: PageContext, d: EventsData): string {
  if (!d.installed) return layout(ctx, 'events', 'Events', html`<p class="muted" data-field="no-events-table">The event stream's table is missing: its migration (JobEvents1764730000000) has not run on this database.</p>`);
  const filters = html`<form method="get" action="${ctx.base}/events" class="filters">
<label>Queue <input name="queue" value="${d.queue ?? ''}" placeholder="any" list="recording-queues"></label>
<datalist id="recording-queues">${d.recording.map((q) => html`<option value="${q}">`)}</datalist>
<label>Type <select name="type"><option value="">any</option>${QUEUE_EVENT_TYPES.map((t) => html`<option${t === d.type ? html` selected` : null}>${t}</option>`)}</select></label>
<button type="submit">Filter</button> <a href="${ctx.base}/events">Clear</a>
</form>`;
  const recording = d.recording.length
    ? html`<p data-field="recording">Recording: ${d.recording.map((q, i) => html`${i > 0 ? ', ' : ''}<a href="${ctx.base}/queues/${encodeURIComponent(q)}">${q}</a>`)}. <span class="muted">A queue's page turns its recording on or off.</span></p>`
    : html`<p class="muted" data-field="recording">No queue records events: turn recording on from a queue's page (or <code>QueueService.recordEvents</code>, <code>pg-queue record-events</code>).</p>`;
  const pager = html`<p class="pager">${d.newer ? html`<a href="${pageUrl(ctx, d, { after: d.newer })}" data-page="newer">Newer</a> ` : null}${
    d.older ? html`<a href="${pageUrl(ctx, d, { before: d.older })}" data-page="older">Older</a>` : null
  }</p>`;
  const list = d.rows.length
    ? eventTable(ctx, d.rows)
    : html`<p class="muted" data-field="events">No event${d.queue || d.type ? ' matches the filter' : ''} here${d.older || d.newer ? ` among the ${formatCount(d.window)} this page looked at: go on with the links below` : ''}.</p>`;
  const body = html`${recording}${filters}${list}${pager}
<p class="muted">Newest first, as committed. A consumer of <code>QueueService.events()</code> gets them in commit-safe order, resuming after the last event id it saw; a page looks at ${formatCount(d.window)} events at most.</p>`;
  return layout(ctx, 'events', 'Events', body);
}
