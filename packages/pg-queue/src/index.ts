export { PgQueueModule } from './pg-queue.module.js';
export { getJobEventsToken, getQueueConnectionToken, getQueueServiceToken, InjectJobEvents, InjectQueueService } from './databases/database-tokens.js';
export { QueueService, type EnqueueOptions, type EnqueueResult, type JobSpec, type JobSpecs } from './queue.service.js';
export type { TransactionClient } from './transactions/transaction-client.js';
export type { InstanceQueue, InstanceRecord } from './store/instance.store.js';
export type { WaitExplanation, WaitGate, WaitReason } from './waiting/wait-reasons.js';
export type { DrizzleLike } from './transactions/clients/drizzle.js';
export type { KyselyLike } from './transactions/clients/kysely.js';
export type { MikroOrmEntityManagerLike } from './transactions/clients/mikro-orm.js';
export type { PrismaClientLike } from './transactions/clients/prisma.js';
export { defineQueue, type QueueDefinition, type QueueDefinitionOptions, type PayloadValidator, type PayloadOf, type ResultOf } from './typed/queue-definition.js';
export type { TraceCarrier } from './tracing/trace-carrier.js';
export type { UniqueOptions } from './utils/unique-options.js';
export type { CancelResult, ChangeResult, OnConflict } from './store/job-store.types.js';
export { JobHandler, type TypedBatchHandlerDecorator, type TypedJobHandlerDecorator } from './decorators/job-handler.decorator.js';
export { OnJobEvent } from './decorators/on-job-event.decorator.js';
export type { WaitOptions } from './waiting/job-waiters.js';
export { MAX_PROGRESS_BYTES } from './pg-queue.constants.js';
export { QUEUE_EVENT_TYPES, compareEventIds, type QueueEvent, type QueueEventType, type EventStreamOptions } from './events/queue-event.interface.js';
export { JobEvents, JOB_EVENT_NAMES, type JobEvent, type JobEventListener, type JobEventName } from './events/job-events.js';
export { RecurringJob } from './decorators/recurring-job.decorator.js';
export type {
  MissedFires,
  RecurringJobOptions,
  RecurringJobPayload,
  ScheduleFire,
  ScheduleInfo,
  ScheduleOptions,
  ScheduleSpec,
  ScheduleSpecBase,
} from './interfaces/recurring-job.interface.js';
export type { BatchJob, Job, JobAttemptRecord, JobLogLine, JobRecord, JobStatus, QueueCounts, QueueStats, TransactionalJob } from './interfaces/job.interface.js';
export type { Jsonified } from './interfaces/jsonified.js';
export type { JobStep } from './steps/step.interfaces.js';
export type {
  CompensatedJob,
  EnqueuedFlow,
  FinishedFlow,
  FlowCompensation,
  FlowDependency,
  FlowEdge,
  FlowJobRecord,
  FlowJobSpec,
  FlowJobSpecs,
  FlowRecord,
  FlowSpec,
  FlowStatus,
  FlowSummary,
  OnParentFailure,
  ParentJob,
} from './flows/flow.interfaces.js';
export type { JobHandlerOptions, BackoffFunction, BatchOptions, ExponentialBackoff, FairnessOptions, RateLimit, ThreadOptions, ThreadResourceLimits } from './interfaces/job-handler-options.interface.js';
export type { ThreadJob } from './interfaces/thread-job.interface.js';
export type {
  PgQueueModuleOptions,
  PgQueueModuleExtras,
  PgQueueConnectionOptions,
  PgQueueMaintenanceOptions,
  PgQueueHistoryOptions,
  PgQueueRecurringOptions,
  PgQueueHealthOptions,
  PgQueueJobLogsOptions,
} from './interfaces/pg-queue-options.interface.js';
export type { QueueLimits, QueueLimitsChange, LimitInForce, LimitSource } from './limits/queue-limits.js';
export { PgQueueError, JobTimeoutError, JobAbortedError, JobSnoozedError, RateLimitedError, JobFailedError, JobWaitTimeoutError } from './errors/pg-queue.error.js';
export { InvalidPayloadError } from './errors/invalid-payload.error.js';
export { PG_QUEUE_MIGRATIONS, CreateBackgroundJobs1764460000000, CreateBackgroundQueues1764470000000, DelayedJobsIndex1764480000000, InFlightIndexByJob1764490000000, FenceToken1764520000000, FinishedJobsIndex1764530000000, UniqueJobs1764540000000, CreateBackgroundSchedules1764550000000, Limits1764560000000, JobResults1764570000000, TraceContext1764580000000, DeferredWakeUps1764590000000, BufferedJobs1764600000000, Flows1764610000000, DurableSteps1764620000000, AttemptHistory1764630000000, SqlEnqueue1764640000000, Instances1764650000000, JobHistory1764660000000, SqlEnqueueRunAt1764672000000, RuntimeLimits1764680000000, FairShare1764690000000, LifoQueueAfter1764700000000, JobLogs1764710000000, RicherSchedules1764720000000, JobEvents1764730000000, EventOrder1764740000000, NestedEventOrder1764750000000, FlowSettleAfterSteps1764760000000, HistoryReturnEvents1764770000000, KeyPriorities1764780000000 } from './migrations/index.js';
export { BackgroundJobEntity } from './store/background-job.entity.js';
export { exponentialBackoff } from './utils/backoff.js';
