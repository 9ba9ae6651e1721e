import type { JobStatus } from '../interfaces/job.interface.js';
import type { DashboardAction } from '../store/dashboard.store.js';

/** Which statuses each action can change; a filter's status narrows them (and the list offers only actions that apply). */
export const ACTION_STATUSES: Record<DashboardAction, JobStatus[]> = {
  retry: ['failed', 'cancelled'],
  cancel: ['queued', 'processing'],
  // A running job is never deleted: cancel it first.
  delete: ['queued', 'completed', 'failed', 'cancelled'],
  'run-now': ['queued'],
};
