import type { EntityManager } from 'typeorm';
import { QueueService, type EnqueueOptions, type EnqueueResult, type JobSpec } from '../queue.service.js';
import type { QueueTestKit } from './queue-test-kit.js';

/**
 * QueueService in inline mode: each enqueue stores its job exactly as in production, then, once the row is
 * committed, runs the due jobs of its queue through the kit before returning. An enqueue inside a
 * transaction (`manager` with a transaction open) cannot run its job before the caller commits, and the
 * kit cannot see that commit: such jobs wait for the next drain() (or the next inline enqueue of the queue).
 */
export class InlineQueueService extends QueueService {
  /** @internal Set by overrideQueueForTesting. */
  kit!: QueueTestKit;

  override async enqueue<TPayload>(queue: string, payload: TPayload, options: EnqueueOptions = {}): Promise<string> {
    const id = await super.enqueue(queue, payload, options);
    await this.runCommitted([queue], options.manager);
    return id;
  }

  override async enqueueUnique<TPayload>(queue: string, payload: TPayload, options: EnqueueOptions & { uniqueKey: string }): Promise<EnqueueResult> {
    const result = await super.enqueueUnique(queue, payload, options);
    await this.runCommitted([queue], options.manager);
    return result;
  }

  override async enqueueMany(jobs: JobSpec[], options: { manager?: EntityManager } = {}): Promise<string[]> {
    const ids = await super.enqueueMany(jobs, options);
    await this.runCommitted(jobs.map((j) => j.queue), options.manager);
    return ids;
  }

  override async enqueueManyUnique(jobs: JobSpec[], options: { manager?: EntityManager } = {}): Promise<EnqueueResult[]> {
    const results = await super.enqueueManyUnique(jobs, options);
    await this.runCommitted(jobs.map((j) => j.queue), options.manager);
    return results;
  }

  private async runCommitted(queues: string[], manager: EntityManager | undefined): Promise<void> {
    if (manager?.queryRunner?.isTransactionActive) return;
    await this.kit.runInline(queues);
  }
}
