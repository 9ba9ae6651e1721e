import { PgQueueError } from '../errors/pg-queue.error.js';
import { JOBS_OF_SEVERAL_DATABASES } from '../pg-queue.messages.js';
import type { QueueDefinition } from '../typed/queue-definition.js';
import { assertQueueName } from '../utils/resolve-options.js';
import type { DatabaseEntry, QueueDatabases } from './queue-databases.js';

/**
 * The service of the database that owns the queues of one call (an enqueue, a batch, a flow): all of them must live in
 * one database (one statement, one transaction), or the call is refused, naming a queue of each.
 */
export function ownerOfCall<S>(databases: QueueDatabases<DatabaseEntry & { readonly service: S }>, method: string, queues: readonly (string | QueueDefinition<unknown, unknown>)[]): S {
  const owners = new Map<string, { queue: string; service: S }>();
  for (const q of queues) {
    const name = typeof q === 'string' ? q : q?.name;
    assertQueueName(name);
    const owner = databases.ownerOf(name);
    if (!owners.has(owner.name)) owners.set(owner.name, { queue: name, service: owner.service });
  }
  if (owners.size > 1) throw new PgQueueError(JOBS_OF_SEVERAL_DATABASES(method, new Map([...owners].map(([db, o]) => [db, o.queue]))));
  const [{ service }] = owners.values();
  return service;
}
