/**
 * Names of the spans' attributes. The messaging.* ones follow OpenTelemetry's messaging semantic conventions
 * (v1.26+: `messaging.operation.type`, span names `send <queue>` and `process <queue>`); the pg_queue.* ones
 * say what the conventions have no name for.
 */
export const ATTR = {
  system: 'messaging.system',
  operationType: 'messaging.operation.type',
  operationName: 'messaging.operation.name',
  destination: 'messaging.destination.name',
  messageId: 'messaging.message.id',
  batchCount: 'messaging.batch.message_count',
  clientId: 'messaging.client.id',
  errorType: 'error.type',
  attempt: 'pg_queue.job.attempt',
  maxAttempts: 'pg_queue.job.max_attempts',
  duplicate: 'pg_queue.job.duplicate',
  snoozeMs: 'pg_queue.job.snooze_ms',
} as const;

/** messaging.system of every span: the library's name, as the conventions ask of a system they do not list. */
export const MESSAGING_SYSTEM = 'nestjs-pg-queue';

/** The tracer's (instrumentation scope's) name. */
export const TRACER_NAME = 'nestjs-pg-queue';

/** The event a consumer span gets when its handler snoozed the job (JobSnoozedError): not an error. */
export const SNOOZED_EVENT = 'pg_queue.job.snoozed';
