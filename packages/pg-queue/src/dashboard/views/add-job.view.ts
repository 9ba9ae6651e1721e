import { ON_CONFLICT_MODES, type AddJobForm } from '../dashboard-add-job.js';
import { html } from './html.js';
import { layout, type PageContext } from './layout.js';

/** The question the form asks before the job is stored. */
export function addJobQuestion(queue: string | null): string {
  return `Add this job${queue ? ` to queue ${queue}` : ''}? It runs as any enqueued job does (a handler of its queue must serve it).`;
}

/**
 * "Add a job": queue, payload, priority, delay or run at, unique key and onConflict, max attempts, LIFO; posted to
 * jobs/new (CSRF-checked and confirmed, as every action), enqueued through QueueService.enqueue. `from` names the job a
 * prefilled form copies ("Duplicate with changes" on a job page).
 */
export function addJobView(ctx: PageContext, form: AddJobForm, from: string | null): string {
  if (!ctx.canAct) return layout(ctx, 'jobs', 'Add a job', html`<p class="muted">Read-only access: adding jobs is not allowed.</p>`);
  const input = (name: keyof AddJobForm, label: string, placeholder: string, size = 20) =>
    html`<label>${label} <input name="${name}" value="${form[name] ?? ''}" placeholder="${placeholder}" size="${size}" autocomplete="off"></label>`;
  const body = html`${from ? html`<p class="muted">A copy of <a href="${ctx.base}/jobs/${from}">job ${from}</a> (its queue, payload, priority and max attempts): change what you need, then add it.</p>` : null}
<form method="post" action="${ctx.base}/jobs/new" class="filters add-job" data-confirm="${addJobQuestion(form.queue ?? null)}">
<input type="hidden" name="_csrf" value="${ctx.csrfToken}"><input type="hidden" name="return" value="${ctx.base}/jobs${form.queue ? `?queue=${encodeURIComponent(form.queue)}` : ''}">
${input('queue', 'Queue', 'emails')}
<label class="payload">Payload (JSON) <textarea name="payload" rows="6" cols="60" spellcheck="false" placeholder='{"to":"ada@example.com"}'>${form.payload ?? '{}'}</textarea></label>
${input('priority', 'Priority (higher first)', '0', 8)}
${input('delaySeconds', 'Delay (seconds)', 'none', 8)}
${input('runAt', 'Or run at (ISO 8601)', '2026-12-01T08:00:00Z')}
${input('uniqueKey', 'Unique key', 'none')}
<label>On conflict <select name="onConflict"><option value="">keep (default)</option>${ON_CONFLICT_MODES.map((m) => html`<option${form.onConflict === m ? html` selected` : null}>${m}</option>`)}</select></label>
${input('maxAttempts', 'Max attempts', "the queue's", 8)}
<label>LIFO <select name="lifo"><option value="">no</option><option value="1"${form.lifo === '1' ? html` selected` : null}>yes: newest first</option></select></label>
<button type="submit">Add job</button> <a href="${ctx.base}/jobs">Cancel</a>
</form>`;
  return layout(ctx, 'jobs', from ? `Duplicate job ${from}` : 'Add a job', body);
}
