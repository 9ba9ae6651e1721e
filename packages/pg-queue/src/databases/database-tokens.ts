import { Inject } from '@nestjs/common';
import { PgQueueConnection } from '../connection/pg-queue-connection.js';
import { JobEvents } from '../events/job-events.js';
import { DEFAULT_DATABASE } from '../pg-queue.constants.js';
import { QueueService } from '../queue.service.js';

const token = (kind: string, name: string | undefined) => (name === undefined || name === DEFAULT_DATABASE ? undefined : `PgQueue:${name}:${kind}`);

/**
 * The injection token of a database's QueueService: the QueueService class for the default one, a string for a
 * named one (`PgQueueModule.forRoot({ name: 'reports', ... })`). Any of them enqueues into every database (each
 * enqueue goes to the database that owns its queue); the token says which database `get(id)` and the other
 * calls by id read.
 */
export function getQueueServiceToken(name?: string): string | typeof QueueService {
  return token('QueueService', name) ?? QueueService;
}

/** The injection token of a database's JobEvents (the events of the jobs its workers run). */
export function getJobEventsToken(name?: string): string | typeof JobEvents {
  return token('JobEvents', name) ?? JobEvents;
}

/** The injection token of a database's PgQueueConnection (its pool settings: the dashboard dials with them). */
export function getQueueConnectionToken(name?: string): string | typeof PgQueueConnection {
  return token('PgQueueConnection', name) ?? PgQueueConnection;
}

/** `@InjectQueueService('reports')`: the QueueService of the PgQueueModule named `reports` (no name: the default one). */
export const InjectQueueService = (name?: string): PropertyDecorator & ParameterDecorator => Inject(getQueueServiceToken(name));

/** `@InjectJobEvents('reports')`: the JobEvents of the PgQueueModule named `reports`. */
export const InjectJobEvents = (name?: string): PropertyDecorator & ParameterDecorator => Inject(getJobEventsToken(name));
