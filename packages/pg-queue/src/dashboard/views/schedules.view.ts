import type { ScheduleInfo } from '../../interfaces/recurring-job.interface.js';
import { nextFireAfter } from '../../recurring/fire-times.js';
import { absTime } from './format.js';
import { html, type HtmlValue } from './html.js';
import { scheduleQuestion } from './confirm-questions.js';
import { cronInWords } from './cron-words.js';
import { actionForm, layout, type PageContext } from './layout.js';

/** How many fires the page lists ahead. */
const FIRES_SHOWN = 3;

/** The schedule's next fires: its row's next, then the cron's after it (none while paused or orphaned). */
function nextFires(s: ScheduleInfo): Date[] {
  const fires = [s.nextFireAt];
  try {
    while (fires.length < FIRES_SHOWN) fires.push(new Date(nextFireAfter(s.cron, s.timeZone, fires[fires.length - 1].getTime())));
  } catch {
    // An expression cron-parser refuses (stored by an older version): the row's next fire only.
  }
  return fires;
}

function nextCell(s: ScheduleInfo): HtmlValue {
  if (s.paused) return html`<span class="paused">paused</span>`;
  if (s.orphaned) return html`<span class="muted">orphaned (no instance declares it)</span>`;
  return html`<ol class="fires" data-field="next-fires">${nextFires(s).map((at) => html`<li>${absTime(at)}</li>`)}</ol>`;
}

export function schedulesView(ctx: PageContext, schedules: ScheduleInfo[]): string {
  const rows = schedules.map((s) => {
    const name = encodeURIComponent(s.name);
    const words = cronInWords(s.cron);
    return html`<tr data-schedule="${s.name}">
<th scope="row">${s.name}</th><td data-label="queue"><a href="${ctx.base}/queues/${encodeURIComponent(s.queue)}">${s.queue}</a></td>
<td data-label="when" data-field="cron">${words ? html`<span data-field="cron-words">${words}</span> ` : null}<code>${s.cron}</code> <span class="muted">${s.timeZone}</span></td>
<td data-label="next">${nextCell(s)}</td>
<td data-label="last">${absTime(s.lastFireAt)}</td><td data-label="source">${s.source}</td>
<td class="full">${s.paused
      ? actionForm(ctx, `/schedules/${name}/resume`, 'Resume', scheduleQuestion('resume', s.name))
      : actionForm(ctx, `/schedules/${name}/pause`, 'Pause', scheduleQuestion('pause', s.name))}${actionForm(ctx, `/schedules/${name}/fire`, 'Fire now', scheduleQuestion('fire', s.name))}${actionForm(ctx, `/schedules/${name}/remove`, 'Remove', scheduleQuestion('remove', s.name, s.source), { source: s.source }, true)}</td></tr>`;
  });
  const body = html`<table class="schedules stack"><thead><tr><th>Name</th><th>Queue</th><th>When</th><th>Next fires</th><th>Last fire</th><th>Source</th><th></th></tr></thead>
<tbody>${schedules.length ? rows : html`<tr><td colspan="7" class="muted">No recurring jobs.</td></tr>`}</tbody></table>
<p class="muted">Times in your zone; the cron runs in the schedule's own time zone. Fire now enqueues the job a tick would (its next fire stays); a schedule declared in code (@RecurringJob) comes back at the next boot after Remove: pause it instead.</p>`;
  return layout(ctx, 'schedules', 'Recurring jobs', body);
}
