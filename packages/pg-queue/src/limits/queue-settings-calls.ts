// QueueService's calls that change or read what a queue allows (README: "Pausing a queue", "Limits changed at runtime",
// "Fair share across keys"), for the queues of this service's database: the service routes a call about another
// database's queue to that database's service first, then lands here. Kept apart so that the service stays a list of
// calls, as ScheduleCalls keeps the schedules'.
import type { JobHandlerRegistry } from '../discovery/job-handler.registry.js';
import type { JobStore } from '../store/job.store.js';
import { checkedWeights } from '../utils/fairness-weights.js';
import type { WorkerPool } from '../worker/worker-pool.js';
import { checkLimitsChange, limitsInForce, type QueueLimits, type QueueLimitsChange } from './queue-limits.js';

export class QueueSettingsCalls {
  constructor(
    private readonly store: JobStore,
    private readonly registry: JobHandlerRegistry,
    /** This process's workers (absent in the CLI): a pause made here reaches their buffers at once. */
    private readonly workers: WorkerPool | undefined,
  ) {}

  async pause(queue: string): Promise<void> {
    // Before (no job of this process may start from its buffer while the pause is on its way) and after (the
    // check that then answers is sent once the pause has committed). Other instances hear a NOTIFY.
    this.workers?.checkBuffer(queue);
    await this.store.pauseQueue(queue);
    this.workers?.checkBuffer(queue);
  }

  async resume(queue: string): Promise<void> {
    await this.store.resumeQueue(queue);
  }

  async setFairnessWeights(queue: string, weights: Record<string, number | null>): Promise<void> {
    await this.store.fairness.setWeights(queue, checkedWeights(`setFairnessWeights("${queue}")`, weights));
  }

  async fairnessWeights(queue: string): Promise<Record<string, number>> {
    return this.store.fairness.weights(queue);
  }

  /** Checked whole before anything is stored; returns the limits in force after the change. */
  async setQueueLimits(queue: string, change: QueueLimitsChange): Promise<QueueLimits> {
    const { set, clear } = checkLimitsChange(queue, change);
    await this.store.setQueueLimits(queue, set, clear);
    return this.queueLimits(queue);
  }

  /** The stored overrides over the decorator's values (this process's registry), with the queue's blocked times. */
  async queueLimits(queue: string): Promise<QueueLimits> {
    const [row] = await this.store.queueSettings([queue]);
    return limitsInForce(queue, row?.limits ?? null, this.registry.get(queue)?.options, { blockedMs: row?.blockedMs ?? 0, keyBlockedMs: row?.keyBlockedMs ?? 0 });
  }
}
