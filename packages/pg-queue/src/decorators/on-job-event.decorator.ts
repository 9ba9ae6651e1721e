import type { JobEventName } from '../events/job-events.js';
import { ON_JOB_EVENT_METADATA } from '../pg-queue.constants.js';

export interface OnJobEventMetadata {
  queue: string;
  events: readonly JobEventName[];
}

/**
 * Calls the method with each JobEvent of `queue` named in `event` ('active', 'completed', 'failed',
 * 'retrying', 'dead', 'cancelled', 'lease-lost', 'flow-finished'), for the attempts this instance's workers run. A method may
 * carry several. A listener that throws or rejects is logged and never affects the job or the worker; one
 * that is slow delays the worker's event loop, so hand long work to a queue of its own.
 */
export const OnJobEvent =
  (queue: string, event: JobEventName | readonly JobEventName[]): MethodDecorator =>
  (_target, _key, descriptor) => {
    const method = descriptor.value as object;
    const declared = (Reflect.getMetadata(ON_JOB_EVENT_METADATA, method) as OnJobEventMetadata[] | undefined) ?? [];
    Reflect.defineMetadata(ON_JOB_EVENT_METADATA, [...declared, { queue, events: [event].flat() }], method);
    return descriptor;
  };
