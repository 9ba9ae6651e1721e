import type { JobStatus } from '../interfaces/job.interface.js';
import type { DashboardAction } from '../store/dashboard.store.js';
import type { ListedStatus } from './listed-status.js';

/** Which statuses each action can change; a filter's status narrows them (and the list offers only actions that apply). */
export const ACTION_STATUSES: Record<DashboardAction, JobStatus[]> = {
  retry: ['failed', 'cancelled'],
  cancel: ['queued', 'processing'],
  // A running job is never deleted: cancel it first.
  delete: ['queued', 'completed', 'failed', 'cancelled'],
  'run-now': ['queued'],
};

/** The job status a listed status filters on: due and scheduled jobs are queued ones. */
export function jobStatusOf(status: ListedStatus): JobStatus {
  return status === 'due' || status === 'scheduled' ? 'queued' : status;
}

/** The statuses `action` changes among jobs listed as `status` (null: any); [] when it changes none of them. */
export function actionStatuses(action: DashboardAction, status: ListedStatus | null): JobStatus[] {
  // Due jobs already run as soon as they can: "run now" has nothing to move.
  if (action === 'run-now' && status === 'due') return [];
  return ACTION_STATUSES[action].filter((s) => status === null || s === jobStatusOf(status));
}

/** What the answer to a retry adds about the jobs of flows it skipped (empty when none). */
export function waitingNote(waiting: readonly { id: string; parent: string }[]): string {
  if (waiting.length === 0) return '';
  const named = waiting.slice(0, 5).map((w) => `job ${w.id} waits for parent job ${w.parent}`).join(', ');
  return ` Not retried: ${named}${waiting.length > 5 ? `, and ${waiting.length - 5} more` : ''} (a parent not completed, or gone): retry the parent, its flow's jobs that failed because of it come back with it.`;
}
