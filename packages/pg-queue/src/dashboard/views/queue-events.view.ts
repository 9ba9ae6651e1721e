import { html, type HtmlValue } from './html.js';
import { actionForm, type PageContext } from './layout.js';

/** Whether the queue records events, as its page shows it; installed false: the JobEvents migration has not run. */
export interface QueueEventsState {
  installed: boolean;
  recording: boolean;
}

/** The question turning a queue's event recording on or off asks before it runs. */
export function recordEventsQuestion(queue: string, on: boolean): string {
  return on
    ? `Record the events of queue ${queue}? Every state change of its jobs is written to background_job_events from now on, in every process (kept for the module's eventRetentionMs); the event triggers are rebuilt, which waits up to 5 s for a lock on the jobs table.`
    : `Stop recording the events of queue ${queue}? Consumers of its events get none from now on; the events already recorded stay until their retention. A process whose handler of this queue declares recordEvents: true turns it on again when it next boots.`;
}

/** The queue page's event stream section: recording or not, a link to the queue's events, and (full access) the switch. */
export function queueEventsSection(ctx: PageContext, queue: string, state: QueueEventsState): HtmlValue {
  if (!state.installed) return null;
  const q = encodeURIComponent(queue);
  const toggle = state.recording
    ? actionForm(ctx, `/queues/${q}/stop-events`, 'Stop recording events', recordEventsQuestion(queue, false), {}, true)
    : actionForm(ctx, `/queues/${q}/record-events`, 'Record events', recordEventsQuestion(queue, true));
  return html`<section id="events" data-slot="events"><h2>Event stream</h2>
<div data-field="records-events" data-recording="${state.recording ? 'yes' : 'no'}">${
    state.recording ? html`Records events: <a href="${ctx.base}/events?queue=${q}">its events</a>.` : html`<span class="muted">Does not record events</span> (<code>QueueService.events()</code> and the Events page get none of it).`
  } ${toggle}</div></section>`;
}
