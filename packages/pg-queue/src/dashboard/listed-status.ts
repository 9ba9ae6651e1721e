import type { JobStatus } from '../interfaces/job.interface.js';

/** A status the dashboard lists and counts: the job statuses, and queued split into due and scheduled. */
export type ListedStatus = JobStatus | 'due' | 'scheduled';
