import type { InstanceRecord, StalledInstanceQueue } from '../../store/instance.store.js';
import { absTime, formatDuration } from './format.js';
import { html } from './html.js';
import { layout, type PageContext } from './layout.js';

export interface InstancesData {
  instances: InstanceRecord[];
  /** Queues with queued jobs that no live instance serves. */
  unserved: string[];
  /** Live instances that have not claimed a queue with due jobs for their bound. */
  stalled: StalledInstanceQueue[];
}

/** The anchor of an instance's row on the instances page (a job's "Lease owner" links to it). */
export function instanceAnchor(id: string): string {
  return `instance-${encodeURIComponent(id)}`;
}

export function instancesView(ctx: PageContext, data: InstancesData): string {
  const rows = data.instances.map(
    (i) => html`<tr id="${instanceAnchor(i.id)}" data-instance="${i.id}" class="${i.live ? 'live' : 'gone'}">
<th scope="row"><code>${i.id}</code></th><td data-label="Host">${i.host}</td><td class="n" data-label="PID">${String(i.pid)}</td>
<td class="full">${i.queues.map((q) => html`<a href="${ctx.base}/jobs?queue=${encodeURIComponent(q.queue)}&amp;status=processing" data-queue="${q.queue}">${q.queue}</a> <span class="muted">${String(q.running)}/${String(q.concurrency)} running</span> `)}</td>
<td data-label="Started">${absTime(i.startedAt)}</td>
<td data-field="seen" data-label="Last seen">${formatDuration(i.seenMsAgo)} ago</td>
<td>${i.live ? 'live' : html`<span class="paused">gone</span> <span class="muted">(stopped writing its row: crashed, frozen or cut off)</span>`}</td></tr>`,
  );
  const unserved = data.unserved.length
    ? html`<p class="error" data-unserved>Nobody runs ${data.unserved.length === 1 ? 'this queue' : 'these queues'}: ${data.unserved.map((q) => html`<a href="${ctx.base}/jobs?queue=${encodeURIComponent(q)}&amp;status=queued">${q}</a> `)}(queued jobs, and no live instance has a handler for the queue).</p>`
    : null;
  const stalled = data.stalled.length
    ? html`<p class="error" data-stalled>Alive but not claiming: ${data.stalled.map(
        (x) => html`<a href="#${instanceAnchor(x.id)}"><code>${x.id}</code></a> has not claimed <a href="${ctx.base}/jobs?queue=${encodeURIComponent(x.queue)}&amp;status=due">${x.queue}</a> for ${formatDuration(x.sinceClaimMs)} (bound ${formatDuration(x.stalledAfterMs)}). `,
      )}Its queue has due jobs and it has idle slots: a wedged claim loop (its readiness probe fails too).</p>`
    : null;
  const body = html`${unserved}${stalled}<table class="instances stack"><thead><tr><th>Instance</th><th>Host</th><th class="n">PID</th><th>Queues</th><th>Started</th><th>Last seen</th><th>State</th></tr></thead>
<tbody>${data.instances.length ? rows : html`<tr><td colspan="7" class="muted">No process with workers has registered.</td></tr>`}</tbody></table>
<p class="muted">Each process that runs workers writes its row every heartbeat and deletes it when it stops; a row not written for a lease and a heartbeat reads as gone, and is deleted an hour later.</p>`;
  return layout(ctx, 'instances', 'Instances', body, { refresh: true });
}
