import type { DashboardAction } from '../../store/dashboard.store.js';
import { actionStatuses } from '../dashboard-actions.js';
import type { ListedStatus } from '../listed-status.js';

/**
 * What each action asks before it runs, in one place: the browser asks it with confirm(), and a browser without
 * JavaScript gets it on the confirmation page (which once read "Do this: jobs 186 delete?"). Each is a sentence
 * that says which jobs change and what happens to them.
 */

/** What a status is called in a sentence: "running" for processing. */
const SAID: Partial<Record<ListedStatus, string>> = { processing: 'running' };

/** "a, b or c" */
function either(words: string[]): string {
  return words.length <= 1 ? (words[0] ?? '') : `${words.slice(0, -1).join(', ')} or ${words[words.length - 1]}`;
}

/** "a, b and c" */
function both(words: string[]): string {
  return words.length <= 1 ? (words[0] ?? '') : `${words.slice(0, -1).join(', ')} and ${words[words.length - 1]}`;
}

/** The jobs a filter covers: "in queue emails", "in every queue". */
function where(queue: string | null): string {
  return queue ? `in queue ${queue}` : 'in every queue';
}

/** The jobs an action on a filter changes, as one noun phrase: "every failed or cancelled job in queue emails". */
function everyJob(action: DashboardAction, queue: string | null, status: ListedStatus | null): string {
  const statuses = status === 'due' || status === 'scheduled' ? [status] : action === 'run-now' ? ['scheduled'] : actionStatuses(action, status).map((s) => SAID[s] ?? s);
  return `every ${either(statuses)} job ${where(queue)}`;
}

/** What happens to the jobs an action changes, after its verb. */
const OUTCOME: Record<DashboardAction, string> = {
  retry: ', each with a fresh set of attempts',
  'run-now': ' now, instead of at its scheduled time',
  cancel: '',
  delete: '',
};

/** What follows the question, when there is more to know. */
const AFTER: Record<DashboardAction, string> = {
  retry: '',
  'run-now': '',
  cancel: ' Queued ones never run; running ones are told to stop.',
  delete: ' Running ones are kept. This cannot be undone.',
};

const VERB: Record<DashboardAction, string> = { retry: 'Retry', 'run-now': 'Run', cancel: 'Cancel', delete: 'Delete' };

export function jobQuestion(action: DashboardAction, id: string, runAt?: string): string {
  switch (action) {
    case 'retry':
      return `Retry job ${id} with a fresh set of attempts?`;
    case 'run-now':
      return runAt ? `Run job ${id} now instead of at ${runAt}?` : `Run job ${id} now instead of at its scheduled time?`;
    case 'cancel':
      return `Cancel job ${id}?`;
    case 'delete':
      return `Delete job ${id}? This cannot be undone.`;
  }
}

/** An action on every job of the list's filter. */
export function bulkQuestion(action: DashboardAction, queue: string | null, status: ListedStatus | null): string {
  return `${VERB[action]} ${everyJob(action, queue, status)}${OUTCOME[action]}?${AFTER[action]}`;
}

/** What an action on selected jobs changes of them. */
const SELECTED_CHANGE: Record<DashboardAction, string> = {
  retry: 'Only failed and cancelled ones change.',
  'run-now': 'Only queued ones that wait for a later time change.',
  cancel: 'Queued ones never run; running ones are told to stop; finished ones stay as they are.',
  delete: 'Running ones are kept. This cannot be undone.',
};

/**
 * An action on the jobs ticked in the list. `ids` null: the question the browser asks, where the script puts the
 * count in for {jobs} ("the 3 selected jobs").
 */
export function selectedQuestion(action: DashboardAction, ids: string[] | null): string {
  const jobs = ids === null ? '{jobs}' : ids.length === 1 ? `job ${ids[0]}` : `jobs ${both(ids)}`;
  const outcome = action === 'run-now' ? ' now, instead of at their scheduled time' : action === 'retry' ? ', each with a fresh set of attempts' : '';
  return `${VERB[action]} ${jobs}${outcome}? ${SELECTED_CHANGE[action]}`;
}

export function queueQuestion(action: 'pause' | 'resume', queue: string): string {
  return action === 'pause' ? `Pause queue ${queue}? Running jobs finish; no new job starts.` : `Resume queue ${queue}?`;
}

export function scheduleQuestion(action: ScheduleAction, name: string, source: 'code' | 'runtime' = 'runtime'): string {
  switch (action) {
    case 'pause':
      return `Pause schedule ${name}? Fires during the pause never run.`;
    case 'resume':
      return `Resume schedule ${name} from its next fire?`;
    case 'fire':
      return `Fire schedule ${name} now? One job is enqueued as a tick would; its next fire stays as it is.`;
    case 'remove':
      return `Remove schedule ${name}? Its jobs already enqueued stay.${source === 'code' ? ' It is declared in code (@RecurringJob): the next boot brings it back; pause it to stop it for good.' : ' This cannot be undone.'}`;
  }
}

/** What the schedules page can do to a schedule. */
export type ScheduleAction = 'pause' | 'resume' | 'fire' | 'remove';
export const SCHEDULE_ACTIONS: readonly ScheduleAction[] = ['pause', 'resume', 'fire', 'remove'];

export function flowQuestion(id: string, name: string | null): string {
  return `Cancel flow ${id}${name === null ? '' : ` (${name})`}? Its queued and blocked jobs never run, its running ones are told to abort, and no compensation runs.`;
}

export function duplicateQuestion(id: string): string {
  return `Enqueue a copy of job ${id} (same queue, payload, priority and max attempts, due now)?`;
}
