import type { LoggerService } from '@nestjs/common';
import type { ClientConfig } from 'pg';
import { PgQueueError } from '../errors/pg-queue.error.js';
import { INVALID_OPTION } from '../pg-queue.messages.js';
import { EVENTS_CHANNEL } from '../store/events.sql.js';
import type { EventPosition, EventStore } from '../store/events.store.js';
import { assertQueueName } from '../utils/resolve-options.js';
import { RetryBackoff, wakeableSleep } from '../utils/retry-backoff.js';
import { PgQueueLogger } from '../utils/pg-queue-logger.js';
import { NotificationListener } from '../worker/notification-listener.js';
import { QUEUE_EVENT_TYPES, parseEventId, type EventStreamOptions, type QueueEvent } from './queue-event.interface.js';

/** The options of one events() call, checked when it is made (a bad one throws there, not at the first next()). */
interface StreamSettings {
  after: EventPosition | undefined;
  queues: readonly string[] | undefined;
  types: readonly string[] | undefined;
  pageSize: number;
  pollIntervalMs: number;
  signal: AbortSignal | undefined;
}

export function checkStreamOptions(options: EventStreamOptions): StreamSettings {
  const where = 'events()';
  let after: EventPosition | undefined;
  if (options.after !== undefined) {
    after = parseEventId(options.after);
    if (!after) throw new PgQueueError(INVALID_OPTION(where, 'after', options.after, `an event id "<tx>-<seq>" (a QueueEvent's id), or '0-0' for the oldest kept`));
  }
  if (options.queues !== undefined) {
    if (!Array.isArray(options.queues) || options.queues.length === 0) throw new PgQueueError(INVALID_OPTION(where, 'queues', options.queues, 'a non-empty array of queue names'));
    for (const q of options.queues) assertQueueName(q);
  }
  if (options.types !== undefined) {
    const bad = Array.isArray(options.types) ? options.types.find((t) => !QUEUE_EVENT_TYPES.includes(t)) : options.types;
    if (!Array.isArray(options.types) || options.types.length === 0 || bad !== undefined) {
      throw new PgQueueError(INVALID_OPTION(where, 'types', bad ?? options.types, `a non-empty array of ${QUEUE_EVENT_TYPES.join(', ')}`));
    }
  }
  const pageSize = options.pageSize ?? 100;
  if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 1000) throw new PgQueueError(INVALID_OPTION(where, 'pageSize', pageSize, 'an integer from 1 to 1000'));
  const pollIntervalMs = options.pollIntervalMs ?? 1_000;
  if (!Number.isInteger(pollIntervalMs) || pollIntervalMs < 10) throw new PgQueueError(INVALID_OPTION(where, 'pollIntervalMs', pollIntervalMs, 'an integer of at least 10 (ms)'));
  return { after, queues: options.queues, types: options.types, pageSize, pollIntervalMs, signal: options.signal };
}

/**
 * The iterator of QueueService.events(): pages of events read in commit-safe order (events.sql.ts), one page at a
 * time as the consumer asks (the next page is read only when the last event of this one was taken: backpressure).
 * When caught up it waits for a NOTIFY on EVENTS_CHANNEL (its own LISTEN connection, dialled at the first wait) or
 * the poll, whichever comes first: a NOTIFY is sent at commit, but its event may still be held back by an older
 * open transaction, which only the poll then finds. A failed read is retried with backoff (logged once per outage),
 * never thrown: the iteration ends only when the consumer stops it (break, return(), or the signal).
 */
export async function* eventStream(
  store: EventStore,
  settings: StreamSettings,
  listen: { config: ClientConfig | undefined; logger: LoggerService },
): AsyncGenerator<QueueEvent, void, undefined> {
  const { signal } = settings;
  const backoff = new RetryBackoff('events(): reading the event stream', listen.logger, 100, Math.max(settings.pollIntervalMs, 1_000));
  let wake: (() => void) | undefined;
  let noticed = false;
  const onAbort = () => wake?.();
  signal?.addEventListener('abort', onAbort);
  let listener: NotificationListener | undefined;
  const sleep = async (ms: number) => {
    if (noticed || signal?.aborted) return;
    const s = wakeableSleep(ms);
    wake = s.wake;
    await s.done;
    wake = undefined;
  };
  try {
    let position = settings.after;
    while (!signal?.aborted) {
      let page;
      try {
        position ??= await store.head();
        noticed = false;
        page = await store.readPage(position, settings, settings.pageSize);
        backoff.succeeded();
      } catch (error) {
        await sleep(backoff.failed(error));
        continue;
      }
      for (const event of page.events) {
        if (signal?.aborted) return;
        yield event;
      }
      if (page.last) position = page.last;
      if (page.read < settings.pageSize) {
        if (!listener && listen.config) {
          listener = new NotificationListener(
            listen.config,
            {
              onJobs: () => undefined,
              onCancel: () => undefined,
              onEvents: () => {
                noticed = true;
                wake?.();
              },
              // Anything recorded while LISTEN was down was missed: read at once.
              onUp: () => {
                noticed = true;
                wake?.();
              },
              onDown: () => undefined,
            },
            listen.logger,
            undefined,
            [EVENTS_CHANNEL],
          );
          listener.start();
        }
        await sleep(settings.pollIntervalMs);
      }
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
    await listener?.close();
  }
}

/** QueueService.events(): the options checked now, the reading started at the first next(). */
export function openEventStream(store: EventStore, options: EventStreamOptions, listenerConfig: ClientConfig | undefined): AsyncGenerator<QueueEvent, void, undefined> {
  const settings = checkStreamOptions(options);
  return eventStream(store, settings, { config: listenerConfig, logger: new PgQueueLogger('PgQueue') });
}
