import type { ScheduleForm } from '../dashboard-schedule-form.js';
import { html } from './html.js';
import { layout, type PageContext } from './layout.js';

/** The question the edit form asks before the schedule is changed. */
export function scheduleEditQuestion(name: string, source: string): string {
  const code = source === 'code' ? ' It is declared in code: the next boot of an app that declares it puts its definition back.' : '';
  return `Change schedule ${name}? Every instance fires by the new definition from its next tick; a changed cron or time zone starts from its next fire after now.${code}`;
}

/**
 * A schedule's edit form (POST schedules/:name/edit: CSRF-checked and confirmed, as every action), filled from the
 * schedule as stored, saved through QueueService.upsertSchedule as `pg-queue schedules set` saves one.
 */
export function scheduleEditView(ctx: PageContext, name: string, source: string, form: ScheduleForm): string {
  if (!ctx.canAct) return layout(ctx, 'schedules', `Schedule ${name}`, html`<p class="muted">Read-only access: editing schedules is not allowed.</p>`);
  const input = (key: keyof ScheduleForm, label: string, placeholder: string, size = 20) =>
    html`<label>${label} <input name="${key}" value="${form[key] ?? ''}" placeholder="${placeholder}" size="${size}" autocomplete="off"></label>`;
  const body = html`<form method="post" action="${ctx.base}/schedules/${encodeURIComponent(name)}/edit" class="filters schedule-edit" data-confirm="${scheduleEditQuestion(name, source)}">
<input type="hidden" name="_csrf" value="${ctx.csrfToken}"><input type="hidden" name="return" value="${ctx.base}/schedules"><input type="hidden" name="source" value="${source}">
${input('queue', 'Queue', 'reports')}
${input('cron', 'Cron', '0 3 * * *')}
${input('everySeconds', 'Or every (seconds)', '900', 10)}
${input('timeZone', 'Time zone', 'UTC')}
<label class="payload">Payload template (JSON object) <textarea name="payload" rows="6" cols="60" spellcheck="false">${form.payload ?? '{}'}</textarea></label>
${input('limit', 'Limit (fires)', 'none', 10)}
${input('startDate', 'Start (ISO 8601)', 'none')}
${input('endDate', 'End (ISO 8601)', 'none')}
${input('priority', 'Priority', '0', 8)}
${input('maxAttempts', 'Max attempts', "the queue's", 8)}
${input('missedFires', 'Missed fires (skip, latest, or a window in seconds)', 'skip', 10)}
<label>Paused <select name="paused"><option value="">no</option><option value="1"${form.paused === '1' ? html` selected` : null}>yes</option></select></label>
<button type="submit">Save</button> <a href="${ctx.base}/schedules">Cancel</a>
</form>
<p class="muted">An empty field takes its default, as an option left out of <code>pg-queue schedules set</code> does. {{fireAt}}, {{fireDate}} and {{name}} in the payload's strings are filled in at each fire.</p>`;
  return layout(ctx, 'schedules', `Edit schedule ${name}`, body);
}
