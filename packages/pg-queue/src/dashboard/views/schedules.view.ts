import type { ScheduleInfo } from '../../interfaces/recurring-job.interface.js';
import { absTime } from './format.js';
import { html } from './html.js';
import { scheduleQuestion } from './confirm-questions.js';
import { actionForm, layout, type PageContext } from './layout.js';

export function schedulesView(ctx: PageContext, schedules: ScheduleInfo[]): string {
  const rows = schedules.map(
    (s) => html`<tr data-schedule="${s.name}">
<th scope="row">${s.name}</th><td><a href="${ctx.base}/jobs?queue=${encodeURIComponent(s.queue)}">${s.queue}</a></td>
<td><code>${s.cron}</code> <span class="muted">${s.timeZone}</span></td>
<td>${s.paused ? html`<span class="paused">paused</span>` : s.orphaned ? html`<span class="muted">orphaned (no instance declares it)</span>` : absTime(s.nextFireAt)}</td>
<td>${absTime(s.lastFireAt)}</td><td>${s.source}</td>
<td>${s.paused
      ? actionForm(ctx, `/schedules/${encodeURIComponent(s.name)}/resume`, 'Resume', scheduleQuestion('resume', s.name))
      : actionForm(ctx, `/schedules/${encodeURIComponent(s.name)}/pause`, 'Pause', scheduleQuestion('pause', s.name))}</td></tr>`,
  );
  const body = html`<table class="schedules"><thead><tr><th>Name</th><th>Queue</th><th>Cron</th><th>Next fire</th><th>Last fire</th><th>Source</th><th></th></tr></thead>
<tbody>${schedules.length ? rows : html`<tr><td colspan="7" class="muted">No recurring jobs.</td></tr>`}</tbody></table>`;
  return layout(ctx, 'schedules', 'Recurring jobs', body);
}
