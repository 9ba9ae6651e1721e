// QueueService.waitForFlow: until the flow reaches a final status, whichever processes run its jobs.
import { setTimeout as sleep } from 'node:timers/promises';
import { JobWaitTimeoutError, PgQueueError } from '../errors/pg-queue.error.js';
import type { FlowStore } from '../store/flow.store.js';
import type { JobWaiters, WaitOptions } from '../waiting/job-waiters.js';
import { FINAL_FLOW_STATUSES, type FlowRecord } from './flow.interfaces.js';

/**
 * Reads the flow's status after each notice that it finished (when the service has waiters) and between notices too
 * (every 25 ms at first, backing off to 1 s: a notice can be missed); the flow's record once it is final.
 */
export async function waitForFlow(flows: FlowStore, waiters: JobWaiters | undefined, id: string, options: WaitOptions): Promise<FlowRecord> {
  const deadline = options.timeoutMs === undefined ? Infinity : Date.now() + options.timeoutMs;
  for (let pauseMs = 25; ; pauseMs = Math.min(1_000, pauseMs * 2)) {
    options.signal?.throwIfAborted();
    const wait = Math.min(pauseMs, Math.max(1, deadline - Date.now()));
    // Registered before the read (a notice sent during it is not missed); dropped on every way out but the wait.
    const pause = waiters?.flowNotice(id, wait, options.signal) ?? { heard: sleep(wait, undefined, { signal: options.signal }), cancel: () => undefined };
    let waiting = false;
    try {
      const state = await flows.flowStatus(id);
      if (!state) throw new PgQueueError(`waitForFlow(${id}): no such flow.`);
      if (FINAL_FLOW_STATUSES.includes(state.status)) return (await flows.getFlow(id))!;
      if (Date.now() >= deadline) throw new JobWaitTimeoutError(id, options.timeoutMs!, 'flow');
      waiting = true;
    } finally {
      if (!waiting) pause.cancel();
    }
    await pause.heard;
  }
}
