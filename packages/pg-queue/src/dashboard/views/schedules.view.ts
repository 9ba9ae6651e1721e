import type { ScheduleInfo } from '../../interfaces/recurring-job.interface.js';
import { nextFireAfter } from '../../recurring/fire-times.js';
import { absTime, formatCount } from './format.js';
import { html, type HtmlValue } from './html.js';
import { scheduleQuestion } from './confirm-questions.js';
import { cronInWords, everyInWords } from './cron-words.js';
import { actionForm, layout, type PageContext } from './layout.js';

/** How many fires the page lists ahead. */
const FIRES_SHOWN = 3;

/**
 * The schedule's next fires: its row's next, then the cron's (or the interval's: the earliest, as an every schedule's
 * next fire is measured from when the last one happened) after it, within its end and the fires its limit leaves.
 */
function nextFires(s: ScheduleInfo): Date[] {
  if (s.nextFireAt === null) return [];
  const shown = Math.min(FIRES_SHOWN, s.firesLeft ?? FIRES_SHOWN);
  const fires = [s.nextFireAt];
  try {
    while (fires.length < shown) {
      const last = fires[fires.length - 1].getTime();
      const next = s.every !== null ? last + s.every : nextFireAfter(s.cron!, s.timeZone, last);
      if (s.endDate && next > s.endDate.getTime()) break;
      fires.push(new Date(next));
    }
  } catch {
    // An expression cron-parser refuses (stored by an older version): the row's next fire only.
  }
  return fires;
}

function nextCell(s: ScheduleInfo): HtmlValue {
  if (s.paused) return html`<span class="paused">paused</span>`;
  if (s.ended) return html`<span class="muted" data-field="ended">${s.ended === 'limit' ? `ended: its limit of ${formatCount(s.limit ?? 0)} fires is reached` : 'ended: its end date is past'}</span>`;
  if (s.orphaned) return html`<span class="muted">orphaned (no instance declares it)</span>`;
  const title = s.every !== null ? 'at the earliest: each fire comes one interval after the previous one happened' : null;
  return html`<ol class="fires" data-field="next-fires"${title ? html` title="${title}"` : null}>${nextFires(s).map((at) => html`<li>${absTime(at)}</li>`)}</ol>`;
}

function whenCell(s: ScheduleInfo): HtmlValue {
  const words = s.every !== null ? everyInWords(s.every) : cronInWords(s.cron ?? '');
  const rule =
    s.every !== null
      ? html`<span data-field="every">${words}</span>`
      : html`${words ? html`<span data-field="cron-words">${words}</span> ` : null}<code>${s.cron}</code> <span class="muted">${s.timeZone}</span>`;
  const window =
    s.startDate || s.endDate
      ? html`<br><span class="muted" data-field="window">${s.startDate ? html`from <span data-field="start">${absTime(s.startDate)}</span>` : null}${s.startDate && s.endDate ? ' ' : null}${s.endDate ? html`until <span data-field="end">${absTime(s.endDate)}</span>` : null}</span>`
      : null;
  return html`${rule}${window}`;
}

function firesCell(s: ScheduleInfo): HtmlValue {
  if (s.limit === null) return html`<span data-field="fires">${formatCount(s.fires)}</span>`;
  return html`<span data-field="fires">${formatCount(s.fires)} of ${formatCount(s.limit)}</span> <span class="muted" data-field="fires-left">(${formatCount(s.firesLeft ?? 0)} left)</span>`;
}

export function schedulesView(ctx: PageContext, schedules: ScheduleInfo[]): string {
  const rows = schedules.map((s) => {
    const name = encodeURIComponent(s.name);
    return html`<tr data-schedule="${s.name}">
<th scope="row">${s.name}</th><td data-label="queue"><a href="${ctx.base}/queues/${encodeURIComponent(s.queue)}">${s.queue}</a></td>
<td data-label="when" data-field="cron">${whenCell(s)}</td>
<td data-label="next">${nextCell(s)}</td>
<td data-label="last">${absTime(s.lastFireAt)}</td><td data-label="fires">${firesCell(s)}</td><td data-label="source">${s.source}</td>
<td class="full">${s.paused
      ? actionForm(ctx, `/schedules/${name}/resume`, 'Resume', scheduleQuestion('resume', s.name))
      : actionForm(ctx, `/schedules/${name}/pause`, 'Pause', scheduleQuestion('pause', s.name))}${actionForm(ctx, `/schedules/${name}/fire`, 'Fire now', scheduleQuestion('fire', s.name))}${actionForm(ctx, `/schedules/${name}/remove`, 'Remove', scheduleQuestion('remove', s.name, s.source), { source: s.source }, true)}${ctx.canAct ? html` <a href="${ctx.base}/schedules/${name}/edit" data-edit-schedule>Edit</a>` : null}</td></tr>`;
  });
  const body = html`<table class="schedules stack"><thead><tr><th>Name</th><th>Queue</th><th>When</th><th>Next fires</th><th>Last fire</th><th>Fires</th><th>Source</th><th></th></tr></thead>
<tbody>${schedules.length ? rows : html`<tr><td colspan="8" class="muted">No recurring jobs.</td></tr>`}</tbody></table>
<p class="muted">Times in your zone; a cron runs in the schedule's own time zone. An interval (every) runs from when the last fire happened, so its next fires are the earliest. Fires counts the fires of the schedule's ticks, which its limit counts; Fire now enqueues the job a tick would, counted by neither, and its next fire stays. A schedule declared in code (@RecurringJob) comes back at the next boot after Remove: pause it instead.</p>`;
  return layout(ctx, 'schedules', 'Recurring jobs', body);
}
