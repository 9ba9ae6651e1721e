import { STALE_CLAIM } from '../pg-queue.messages.js';
import type { EagerClaim } from '../store/enqueue.store.js';
import type { ClaimedJob } from '../store/job.store.js';
import { HeldJob } from './held-job.js';
import type { RunningJobs } from './running-jobs.js';
import type { StartMarks } from './start-marks.js';
import type { WorkerState } from './worker-state.js';

/** An eager start's insert (JobStore.insertEagerJob), given the claim it makes: the job's id, and the job if it claimed it. */
export type EagerInsert = (claim: EagerClaim) => Promise<{ id: string; job?: ClaimedJob }>;

/**
 * Eager start: a job of this process's enqueue, inserted already claimed by this worker (docs/concepts.md, Eager
 * start). Its insert runs in a slot kept for it (`eager`); a job it comes back claimed with is held as a claim's would
 * be: started (or armed behind the armed jobs) when the insert claimed it started, through the start mark when it
 * came back buffered (its last attempt), and given back when the worker is stopping or stalled past its deadline.
 */
export class EagerStarts {
  /** The eager inserts in flight, which stopClaiming waits for (their jobs go back if they come back claimed). */
  readonly inFlight = new Set<Promise<unknown>>();

  constructor(
    private readonly state: WorkerState,
    private readonly runs: RunningJobs,
    private readonly marks: StartMarks,
    private readonly pump: () => void,
  ) {}

  /**
   * Runs the insert of an eager start in a slot kept for it (check QueueWorker.eagerSlotFree first): a job it comes
   * back claimed with starts at once, as a claimed job would; one that went in queued leaves the slot to the claim
   * loop (the trigger's NOTIFY wakes it). Returns the job's id; an insert that fails frees the slot and throws.
   */
  start(insert: EagerInsert): Promise<string> {
    this.state.slots.eager += 1;
    const run = this.run(insert);
    this.inFlight.add(run);
    const forget = () => void this.inFlight.delete(run);
    run.then(forget, forget);
    return run;
  }

  private async run(insert: EagerInsert): Promise<string> {
    const sentAt = performance.now();
    const { config, deadlines, slots } = this.state;
    let result: { id: string; job?: ClaimedJob };
    try {
      // Claimed started (charged, the full lease), or on its last attempt as a read-ahead claim is (buffered, uncharged,
      // the short lease), to start through the start mark: see insertEagerJob.
      result = await insert({ workerId: config.workerId, bufferLeaseMs: deadlines.bufferLeaseMs, leaseMs: config.leaseMs, storedLimits: this.state.storedLimits });
    } finally {
      slots.eager -= 1;
    }
    if (result.job) await this.accept(result.job, sentAt);
    else this.pump();
    return result.id;
  }

  /**
   * The eager insert came back claimed (buffered, uncharged): the job takes its slot and starts once its start mark
   * lands (as a job from the buffer), unless the worker is stopping or stalled meanwhile (then it goes back).
   */
  private accept(claimed: ClaimedJob, sentAt: number): Promise<void> | undefined {
    let givenBack: Promise<void> | undefined;
    const { state } = this;
    state.guarded('starting an eagerly claimed job', () => {
      const { config, deadlines } = state;
      const job = new HeldJob(config.queue, claimed, state.shared.services);
      // As for a claim's jobs (accept): a buffered one's mark goes only in the first half of its short lease; a started
      // one starts in the first half of its lease (its slot was kept for it; armed if jobs marked ahead came first).
      job.startBy = claimed.buffered ? deadlines.buffered(sentAt) : deadlines.started(sentAt);
      if (!state.stopping) state.held.set(job.id, job);
      const place = state.slots.afterEagerInsert(state.stopping, !state.stopping && performance.now() < job.startBy, claimed.buffered === true, state.armed.length);
      if (place === 'mark') {
        this.marks.gather(job);
        this.marks.send();
      } else if (place === 'arm') {
        state.arm(job);
      } else if (place === 'start') {
        if (!this.runs.startJob(job)) {
          state.held.delete(job.id);
          givenBack = state.giveBack([job], 'claimed at enqueue, not started in time');
        }
      } else {
        if (place === 'stale') state.shared.logger.warn(STALE_CLAIM(config.queue, 1, Math.round(performance.now() - sentAt), config.leaseMs));
        givenBack = state.giveBack([job], state.stopping ? 'claimed at enqueue while shutting down' : 'claimed at enqueue before this process stalled');
      }
    });
    this.pump();
    return givenBack;
  }
}
