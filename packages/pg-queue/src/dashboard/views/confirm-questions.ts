import type { JobStatus } from '../../interfaces/job.interface.js';
import type { DashboardAction } from '../../store/dashboard.store.js';

/**
 * What each action asks before it runs, in one place: the browser asks it with confirm(), and a browser without
 * JavaScript gets it on the confirmation page (which once read "Do this: jobs 186 delete?").
 */

/** The jobs a bulk action covers, as the jobs list's filter says: "failed jobs of queue emails", "jobs of every queue". */
export function describeJobs(queue: string | null, status: JobStatus | null): string {
  return `${status ? `${status} ` : ''}jobs${queue ? ` of queue ${queue}` : ' of every queue'}`;
}

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

export function bulkQuestion(action: DashboardAction, queue: string | null, status: JobStatus | null): string {
  const jobs = describeJobs(queue, status);
  switch (action) {
    case 'retry':
      return `Retry all ${jobs} (failed and cancelled ones)?`;
    case 'run-now':
      return `Run all ${jobs} that wait for a later time now?`;
    case 'cancel':
      return `Cancel all ${jobs} (queued and running ones)?`;
    case 'delete':
      return `Delete all ${jobs} (except running ones)? This cannot be undone.`;
  }
}

export function queueQuestion(action: 'pause' | 'resume', queue: string): string {
  return action === 'pause' ? `Pause queue ${queue}? Running jobs finish; no new job starts.` : `Resume queue ${queue}?`;
}

export function scheduleQuestion(action: 'pause' | 'resume', name: string): string {
  return action === 'pause' ? `Pause schedule ${name}? Fires during the pause never run.` : `Resume schedule ${name} from its next fire?`;
}

export function flowQuestion(id: string, name: string | null): string {
  return `Cancel flow ${id}${name === null ? '' : ` (${name})`}? Its queued and blocked jobs never run, its running ones are told to abort, and no compensation runs.`;
}
