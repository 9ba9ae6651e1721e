import type { LoggerService } from '@nestjs/common';
import type { JobStore } from '../store/job.store.js';
import type { ReleasedJob } from '../store/job-store.types.js';
import { errorLine } from '../utils/error-text.js';
import { withTimeout } from '../utils/retry-backoff.js';

/** How long a shutdown waits for a put-back; past it, the sweeper puts the jobs back once their leases lapse. */
export const PUT_BACK_DEADLINE_MS = 5_000;

/**
 * Puts jobs this process claimed but will not finish back in the queue at once, without counting the attempt
 * (shutdown), with the lines their handlers logged that no heartbeat wrote (job.log()). Never throws: what could not
 * be put back is logged by id, and the sweeper takes it over. Returns how many went back.
 */
export async function putBack(store: JobStore, workerId: string, jobs: ReleasedJob[], why: string, logger: LoggerService): Promise<number> {
  if (jobs.length === 0) return 0;
  try {
    return await withTimeout(store.releaseJobs(workerId, jobs), PUT_BACK_DEADLINE_MS, 'putting jobs back');
  } catch (error) {
    const ids = jobs.slice(0, 20).map((j) => j.id).join(', ') + (jobs.length > 20 ? `, ... (${jobs.length} in all)` : '');
    logger.error(`shutdown: could not put back ${jobs.length} job(s) ${why} (${errorLine(error)}): ${ids}; the sweeper will, once their lease expires`);
    return 0;
  }
}
