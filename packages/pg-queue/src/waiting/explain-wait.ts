import type { InstanceStore } from '../store/instance.store.js';
import type { WaitStore } from '../store/wait.store.js';
import { queueLimitsOf, waitReasons, type WaitExplanation } from './wait-reasons.js';

/**
 * Why job `id` is not running (QueueService.whyNotRunning, the dashboard's job page): its facts, then, for a queued
 * job, the instances registry (who serves the queue, under which limits) and, when the queue has a rate limit, its
 * window. Null when there is no such job.
 */
export async function explainWait(waits: WaitStore, instances: InstanceStore, id: string): Promise<WaitExplanation | null> {
  const found = await waits.jobWaitFacts(id);
  if (!found) return null;
  const { facts, now } = found;
  const registry = facts.status === 'queued' ? await instances.list() : [];
  const { limits } = queueLimitsOf(facts.queue_name, registry);
  const rate = facts.status === 'queued' && limits.rateLimit ? await waits.rateWindow(facts.queue_name, limits.rateLimit.intervalMs) : undefined;
  // A job read ahead into a buffer has not started: it waits, as a queued one does.
  const status = facts.status === 'processing' && facts.buffered ? 'queued' : facts.status;
  return { id: facts.id, queue: facts.queue_name, status, reasons: waitReasons(facts, registry, rate, now) };
}
