import type { AttemptHistoryRow, JobFlowRow } from '../../store/dashboard.store.js';
import { storedLogs } from '../../utils/stored-logs.js';
import { terminalText } from '../../utils/terminal-text.js';
import { absTime, formatJson, formatRelative, formatSpan, formatTime } from './format.js';
import { waitingText } from './flow-graph.js';
import { instanceAnchor } from './instances.view.js';
import type { WaitExplanation } from '../../waiting/wait-reasons.js';
import { html, type HtmlValue } from './html.js';
import { duplicateQuestion, jobQuestion } from './confirm-questions.js';
import { actionForm, layout, type PageContext } from './layout.js';
import { listedStatus, statusBadge } from './jobs.view.js';
import { jobEventsBlock, type JobEventsData } from './event-rows.view.js';

/** Columns shown in their own place; any other column (a later migration's) is listed under "Other columns". */
const PLACED = new Set([
  'id', 'queue_name', 'status', 'payload', 'result', 'progress', 'attempts', 'max_attempts', 'priority', 'run_at', 'last_error',
  'locked_by', 'locked_at', 'lease_expires_at', 'created_at', 'updated_at', 'finished_at', 'unique_key', 'concurrency_key', 'buffered',
  'flow_id', 'flow_ref', 'compensate', 'compensates', 'steps', 'trace_context', 'logs', 'lifo', 'successor_id', 'waits_for_id',
]);
/**
 * The queue's own bookkeeping, which nobody acts on: the claim's fence, the waiters' mark, the limits' mark. Not
 * shown (the "Other columns" block listed them, to no one's use).
 */
const INTERNAL = new Set(['fence_token', 'awaited', 'limited']);

/** A job's progress as a bar, when it is a number or { percent } (a percentage), or { current, total } / { done, of }; null otherwise. */
export function progressBar(value: unknown): HtmlValue {
  const finite = (n: unknown): n is number => typeof n === 'number' && Number.isFinite(n);
  let current: number;
  let total: number;
  if (finite(value)) [current, total] = [value, 100];
  else if (value !== null && typeof value === 'object' && finite((value as { current?: unknown }).current) && finite((value as { total?: unknown }).total)) [current, total] = [(value as { current: number }).current, (value as { total: number }).total];
  else if (value !== null && typeof value === 'object' && finite((value as { done?: unknown }).done) && finite((value as { of?: unknown }).of)) [current, total] = [(value as { done: number }).done, (value as { of: number }).of];
  else if (value !== null && typeof value === 'object' && finite((value as { percent?: unknown }).percent)) return progressBar((value as { percent: number }).percent);
  else return null;
  if (!(total > 0)) return null;
  const part = Math.min(Math.max(current, 0), total);
  const percent = Math.round((100 * part) / total);
  const text = total === 100 && finite(value) ? `${percent} %` : `${current} of ${total} (${percent} %)`;
  return html`<div class="progress" data-field="progress-bar"><progress max="${String(total)}" value="${String(part)}" aria-label="progress: ${text}"></progress> <span>${text}</span></div>`;
}
/**
 * Handlers often put payload data in their errors: hidePayloads hides the last error too (not whether there is one).
 * last_error is the error of the latest failed attempt, kept through retries: only a failed job's is its last word,
 * so any other status shows it as the previous attempt's.
 */
function lastError(ctx: PageContext, text: string | null): HtmlValue {
  if (text === null) return html`<p class="muted">none</p>`;
  if (ctx.hidePayloads) return html`<p class="muted">hidden (hidePayloads)</p>`;
  return html`<pre class="stack" data-field="last_error">${shownText(text)}</pre>`;
}

/** Values the data may hold and hidePayloads hides (and the last error, above); a flow job's compensation holds a payload. */
const SENSITIVE = new Set(['payload', 'result', 'progress', 'compensate']);

/**
 * Text a handler wrote (an error's stack, a logged line) as the page shows it: the characters a terminal would act on
 * (ESC of an ANSI colour, the bidirectional overrides) as visible escapes (`\u001b`), line feeds and tabs kept; the
 * template escapes the HTML.
 */
function shownText(text: string): string {
  return terminalText(text);
}

/** An attempt's error: its first line, and the whole of it (the stack, its causes) when there is more, unfolded on a click. */
function attemptError(text: string): HtmlValue {
  const shown = shownText(text);
  const newline = shown.indexOf('\n');
  if (newline < 0) return html`<span>${shown}</span>`;
  return html`<details class="stack"><summary>${shown.slice(0, newline)}</summary><pre data-field="attempt-error">${shown}</pre></details>`;
}

/**
 * The attempts that did not complete (README: "Attempt history"), oldest first: number, worker, when it started, how
 * long it ran, how it ended, and its error: the first line, the whole stack unfolded (hidden with hidePayloads, as
 * last_error is).
 */
function attemptsBlock(ctx: PageContext, attempts: AttemptHistoryRow[]): HtmlValue {
  if (attempts.length === 0) return null;
  // A retry starts the count again (1 2 3, retried, 1 2 3): each run under its own heading row.
  const runs = attempts.reduce((n, a, i) => (i > 0 && a.attempt <= attempts[i - 1].attempt ? n + 1 : n), 1);
  let run = 1;
  const rows = attempts.map((a, i) => {
    const newRun = i === 0 ? runs > 1 : a.attempt <= attempts[i - 1].attempt;
    if (i > 0 && newRun) run++;
    const separator = newRun ? html`<tr class="run" data-run="${String(run)}"><th colspan="6" scope="rowgroup">Run ${String(run)}${run > 1 ? ' (after a retry)' : ''}</th></tr>` : null;
    const error = a.error === null ? html`<span class="muted">none</span>` : ctx.hidePayloads ? html`<span class="muted">hidden (hidePayloads)</span>` : attemptError(a.error);
    const duration = a.duration_ms === null ? '—' : formatSpan(a.duration_ms);
    return html`${separator}<tr><td data-label="attempt">${String(a.attempt)}</td><td data-label="worker">${a.worker ?? '—'}</td><td data-label="started">${a.started_at === null ? '—' : absTime(a.started_at)}</td><td data-label="ran for">${duration}</td><td data-label="outcome">${a.outcome}</td><td class="full" data-label="error">${error}</td></tr>`;
  });
  return html`<h2>Attempt history</h2>
<p class="muted">Each attempt that did not complete, oldest first, by run (a retry starts a new run at attempt 1), with its error's whole stack (click it); the job's fields above are its latest attempt.</p>
<table data-field="attempts" class="stack"><thead><tr><th>attempt</th><th>worker</th><th>started</th><th>ran for</th><th>outcome</th><th>error</th></tr></thead><tbody>${rows}</tbody></table>`;
}


/**
 * The lines handlers wrote with job.log() (README: "Job logs"), oldest first, under a heading row per attempt (and a
 * run's, when a retry started the count again, as the attempt history splits them): when each was logged and its text,
 * escaped. With hidePayloads, how many there are, not what they say (handlers log what their payloads hold).
 */
function logsBlock(ctx: PageContext, stored: unknown): HtmlValue {
  const { lines, dropped } = storedLogs(stored);
  if (lines.length === 0 && dropped === 0) return null;
  const kept = `${lines.length} line${lines.length === 1 ? '' : 's'}`;
  const older = dropped > 0 ? `; ${dropped} older line${dropped === 1 ? '' : 's'} dropped (the module's jobLogs.maxLines)` : '';
  if (ctx.hidePayloads) return html`<h2>Logs</h2><p class="muted" data-field="logs">${kept}${older}: hidden (hidePayloads)</p>`;
  let run = 1;
  const rows = lines.map((l, i) => {
    const previous = i > 0 ? lines[i - 1].attempt : undefined;
    if (previous !== undefined && l.attempt < previous) run++;
    const heading =
      previous === l.attempt ? null : html`<tr class="run" data-attempt="${String(l.attempt)}"><th colspan="2" scope="rowgroup">Attempt ${String(l.attempt)}${run > 1 ? ` (run ${run}, after a retry)` : ''}</th></tr>`;
    return html`${heading}<tr><td class="when" data-label="logged">${absTime(l.at)}</td><td class="full"><pre class="log">${shownText(l.line)}</pre></td></tr>`;
  });
  return html`<h2>Logs</h2>
<p class="muted">Written by job.log(), oldest first, by attempt: ${kept}${older}.</p>
<table data-field="logs" class="stack"><thead><tr><th>logged</th><th>line</th></tr></thead><tbody>${rows}</tbody></table>`;
}

/**
 * What job.step() and job.sleep() recorded (docs/guides/durable-steps.md), in order: each step, the attempt that
 * recorded it, when, and its result (hidden with hidePayloads, as the job's own result is); a sleep, until when.
 */
function stepsBlock(ctx: PageContext, steps: unknown): HtmlValue {
  if (!Array.isArray(steps) || steps.length === 0) return null;
  const rows = (steps as { name: string; result?: unknown; attempt: number; at: string; until?: string }[]).map((s) => {
    const what =
      s.until !== undefined
        ? html`<span class="muted">sleep until ${absTime(s.until)}</span>`
        : ctx.hidePayloads
          ? html`<span class="muted">hidden (hidePayloads)</span>`
          : 'result' in s
            ? html`<pre>${formatJson(s.result)}</pre>`
            : html`<span class="muted">no result</span>`;
    return html`<tr><td data-label="step">${s.name}</td><td data-label="attempt">${String(s.attempt)}</td><td data-label="recorded">${absTime(s.at)}</td><td class="full">${what}</td></tr>`;
  });
  return html`<h2>Steps</h2>
<p class="muted">Recorded by job.step() and job.sleep(): a later attempt returns these results without running the step again.</p>
<table data-field="steps" class="stack"><thead><tr><th>step</th><th>attempt</th><th>recorded</th><th>result</th></tr></thead><tbody>${rows}</tbody></table>`;
}

/**
 * A flow job's place in its flow: the flow (a link), its ref, and for a compensation job the job it undoes. `flow`
 * null with a flow_id: the flow's row is gone.
 */
function flowFields(ctx: PageContext, row: Record<string, unknown>, flow: JobFlowRow | null): HtmlValue {
  if (row.flow_id === null || row.flow_id === undefined) return null;
  const flowId = String(row.flow_id);
  const link = flow
    ? html`<a href="${ctx.base}/flows/${flowId}">${flow.name === null ? `flow ${flowId}` : flow.name}</a> <span class="muted">(flow ${flowId}, ${flow.status})</span>`
    : html`flow ${flowId} <span class="muted">(no longer in the table)</span>`;
  const compensates = row.compensates === null || row.compensates === undefined ? null : String(row.compensates);
  return html`<dt>Flow</dt><dd data-field="flow">${link}</dd>
<dt>Ref in the flow</dt><dd data-field="flow_ref">${row.flow_ref === null || row.flow_ref === undefined ? '—' : String(row.flow_ref)}</dd>
${compensates ? html`<dt>Compensates</dt><dd data-field="compensates"><a href="${ctx.base}/jobs/${compensates}">job ${compensates}</a> (runs because the flow failed after it completed)</dd>` : null}`;
}

export function jobView(ctx: PageContext, row: Record<string, unknown>, now: Date, flow: JobFlowRow | null = null, attempts: AttemptHistoryRow[] = [], why: WaitExplanation | null = null, events: JobEventsData | null = null): string {
  const id = String(row.id);
  const status = String(row.status);
  const str = (key: string) => (row[key] === null || row[key] === undefined ? null : String(row[key]));
  // Buffered: claimed into a worker's read-ahead buffer, not started (docs/concepts.md): it waits, so it reads as queued.
  const buffered = status === 'processing' && row.buffered === true;
  const readAhead = buffered ? html` <span class="muted" data-field="read_ahead_by">read ahead by ${str('locked_by') ?? '—'}, not started</span>` : null;
  // A blocked job runs once its parents are done: which ones it still waits for.
  const waiting = status === 'blocked' && flow?.waiting_for ? html` <span data-field="waiting_for">blocked: waiting for ${waitingText(flow.waiting_for, flow.waiting)}</span>` : null;
  const runAt = str('run_at');
  const waitsForLater = status === 'queued' && runAt !== null && new Date(runAt) > now;
  const actions: HtmlValue[] = [];
  const path = `/jobs/${id}`;
  if (status === 'failed' || status === 'cancelled') actions.push(actionForm(ctx, `${path}/retry`, 'Retry', jobQuestion('retry', id)));
  if (waitsForLater) actions.push(actionForm(ctx, `${path}/run-now`, 'Run now', jobQuestion('run-now', id, formatTime(runAt))));
  if (status === 'queued' || status === 'processing') actions.push(actionForm(ctx, `${path}/cancel`, 'Cancel', jobQuestion('cancel', id), {}, true));
  // A copy of it, enqueued anew (not for a job of a flow: the copy would have no place in it).
  if (row.flow_id === null || row.flow_id === undefined) {
    actions.push(actionForm(ctx, `${path}/duplicate`, 'Duplicate', duplicateQuestion(id)));
    if (ctx.canAct) actions.push(html`<a href="${ctx.base}/jobs/new?from=${id}" data-duplicate-form>Duplicate with changes</a> `);
  }
  // A blocked job is neither cancelled nor deleted on its own: its flow waits for it (cancel the flow instead).
  if (status !== 'processing' && status !== 'blocked') actions.push(actionForm(ctx, `${path}/delete`, 'Delete', jobQuestion('delete', id), { return: `${ctx.base}/jobs` }, true));

  const block = (key: string, title: string) => {
    if (!(key in row)) return null;
    const value = row[key];
    if (SENSITIVE.has(key) && ctx.hidePayloads) return html`<h2>${title}</h2><p class="muted">hidden (hidePayloads)</p>`;
    return html`<h2>${title}</h2><pre data-field="${key}">${value === null ? '—' : formatJson(value)}</pre>`;
  };
  const timeline = [
    ['created', 'created_at'],
    ['due (run at)', 'run_at'],
    ['last claimed by a worker', 'locked_at'],
    ['lease ends', 'lease_expires_at'],
    ['finished', 'finished_at'],
    ['last changed', 'updated_at'],
  ]
    .filter(([, key]) => str(key) !== null)
    .map(([label, key]) => ({ label, at: str(key)! }))
    .sort((a, b) => new Date(a.at).getTime() - new Date(b.at).getTime());
  const others = Object.keys(row).filter((k) => !PLACED.has(k) && !INTERNAL.has(k));
  // A job in a durable sleep (job.sleep(), its last step) is named so, not "scheduled" like any later run_at.
  const sleeping = why?.reasons.some((r) => r.gate === 'sleeping') ?? false;
  const shown = buffered ? 'due' : sleeping ? 'sleeping' : listedStatus({ status, run_at: runAt ?? now, now });
  const queueName = String(row.queue_name);
  const resumeWhere = why?.reasons.some((r) => r.gate === 'paused')
    ? html`<p data-field="resume-where">Resume it on <a href="${ctx.base}/queues/${encodeURIComponent(queueName)}">the page of queue ${queueName}</a> (its Resume button), or with <code>pg-queue resume ${queueName}</code>.</p>`
    : null;
  const traceparent = (row.trace_context as { traceparent?: unknown } | null | undefined)?.traceparent;
  const bar = 'progress' in row && !ctx.hidePayloads ? progressBar(row.progress) : null;
  const body = html`<p>${statusBadge(shown)}${readAhead}${waiting} ${actions}</p>
${bar}
<dl class="fields">
${flowFields(ctx, row, flow)}
<dt>Queue</dt><dd><a href="${ctx.base}/jobs?queue=${encodeURIComponent(String(row.queue_name))}">${String(row.queue_name)}</a></dd>
<dt>Attempts</dt><dd>${String(row.attempts)} of ${String(row.max_attempts)}</dd>
<dt>Priority</dt><dd>${String(row.priority)}</dd>
${status === 'processing'
    ? html`<dt>Lease owner</dt><dd data-field="locked_by">${str('locked_by') ? html`<a href="${ctx.base}/instances#${instanceAnchor(str('locked_by')!)}">${str('locked_by')}</a>` : '—'}${str('lease_expires_at') ? html` (${buffered ? 'in its read-ahead buffer, ' : ''}lease until ${absTime(str('lease_expires_at'))})` : ''}</dd>`
    : html`<dt>Last run by</dt><dd data-field="locked_by">${str('locked_by') ?? '—'}</dd>`}
<dt>Unique key</dt><dd>${str('unique_key') ?? '—'}</dd>
${str('successor_id') ? html`<dt>Successor</dt><dd data-field="successor_id"><a href="${ctx.base}/jobs/${str('successor_id')!}">job ${str('successor_id')!}</a> waits for this one to end (onConflict 'queue-after')</dd>` : null}
${str('waits_for_id') ? html`<dt>Waits for</dt><dd data-field="waits_for_id"><a href="${ctx.base}/jobs/${str('waits_for_id')!}">job ${str('waits_for_id')!}</a>, the holder of its unique key (onConflict 'queue-after')</dd>` : null}
${row.lifo === true ? html`<dt>Order</dt><dd data-field="lifo">LIFO: claimed before the FIFO jobs of its priority, the newest first</dd>` : null}
<dt>Concurrency key</dt><dd>${str('concurrency_key') ?? '—'}</dd>
${typeof traceparent === 'string' ? html`<dt>Trace</dt><dd data-field="traceparent"><code>${traceparent}</code></dd>` : null}
</dl>
${why ? html`<h2>Why it is not running</h2><ul class="why" data-field="why">${why.reasons.map((r) => html`<li data-gate="${r.gate}">${r.reason}</li>`)}</ul>${resumeWhere}` : null}
<h2>Timeline</h2>
<ol class="timeline">${timeline.map((t) => html`<li><strong>${t.label}</strong>: ${absTime(t.at)} <span class="muted">(${formatRelative(t.at, now)})</span></li>`)}</ol>
${block('payload', 'Payload')}
${'result' in row ? block('result', 'Result') : html`<h2>Result</h2><p class="muted">Not recorded by this version of the schema.</p>`}
${'progress' in row && !bar ? block('progress', 'Progress') : null}
${stepsBlock(ctx, row.steps)}
${row.compensate !== null && row.compensate !== undefined ? block('compensate', 'Compensation (runs if the flow fails after this job completed)') : null}
<h2>${status === 'failed' ? 'Last error' : 'Previous attempt’s error'}</h2>${lastError(ctx, str('last_error'))}
${attemptsBlock(ctx, attempts)}
${logsBlock(ctx, row.logs)}
${jobEventsBlock(ctx, String(row.queue_name), events)}
${others.length ? html`<h2>Other columns</h2><dl class="fields">${others.map((k) => html`<dt>${k}</dt><dd>${formatJson(row[k])}</dd>`)}</dl>` : null}`;
  // Until it finishes, the page follows the job: the script reloads its content every refreshMs.
  const live = status === 'queued' || status === 'processing' || status === 'blocked';
  return layout(ctx, 'jobs', `Job ${id}`, body, { live });
}
