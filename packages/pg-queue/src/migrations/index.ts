import { CreateBackgroundJobs1764460000000 } from './1764460000000-create-background-jobs.js';
import { CreateBackgroundQueues1764470000000 } from './1764470000000-create-background-queues.js';
import { DelayedJobsIndex1764480000000 } from './1764480000000-delayed-jobs-index.js';
import { InFlightIndexByJob1764490000000 } from './1764490000000-in-flight-index-by-job.js';
import { FenceToken1764520000000 } from './1764520000000-fence-token.js';
import { FinishedJobsIndex1764530000000 } from './1764530000000-finished-jobs-index.js';
import { UniqueJobs1764540000000 } from './1764540000000-unique-jobs.js';
import { CreateBackgroundSchedules1764550000000 } from './1764550000000-create-background-schedules.js';
import { Limits1764560000000 } from './1764560000000-limits.js';
import { JobResults1764570000000 } from './1764570000000-job-results.js';
import { TraceContext1764580000000 } from './1764580000000-trace-context.js';
import { DeferredWakeUps1764590000000 } from './1764590000000-deferred-wake-ups.js';
import { BufferedJobs1764600000000 } from './1764600000000-buffered-jobs.js';
import { Flows1764610000000 } from './1764610000000-flows.js';
import { DurableSteps1764620000000 } from './1764620000000-durable-steps.js';
import { AttemptHistory1764630000000 } from './1764630000000-attempt-history.js';
import { SqlEnqueue1764640000000 } from './1764640000000-sql-enqueue.js';
import { Instances1764650000000 } from './1764650000000-instances.js';
import { JobHistory1764660000000 } from './1764660000000-job-history.js';
import { FlowOperatorActions1764671390000 } from './1764671390000-flow-operator-actions.js';
import { SqlEnqueueRunAt1764672000000 } from './1764672000000-sql-enqueue-run-at.js';
import { RuntimeLimits1764680000000 } from './1764680000000-runtime-limits.js';
import { FairShare1764690000000 } from './1764690000000-fair-share.js';
import { LifoQueueAfter1764700000000 } from './1764700000000-lifo-queue-after.js';
import { JobLogs1764710000000 } from './1764710000000-job-logs.js';
import { RicherSchedules1764720000000 } from './1764720000000-richer-schedules.js';
import { JobEvents1764730000000 } from './1764730000000-job-events.js';
import { EventOrder1764740000000 } from './1764740000000-event-order.js';
import { NestedEventOrder1764750000000 } from './1764750000000-nested-event-order.js';
import { FlowSettleAfterSteps1764760000000 } from './1764760000000-flow-settle-after-steps.js';
import { HistoryReturnEvents1764770000000 } from './1764770000000-history-return-events.js';
import { KeyPriorities1764780000000 } from './1764780000000-key-priorities.js';

/** The queue's schema migrations, in order: add them to your own DataSource's `migrations`, or let the module run them. */
export const PG_QUEUE_MIGRATIONS = [
  CreateBackgroundJobs1764460000000,
  CreateBackgroundQueues1764470000000,
  DelayedJobsIndex1764480000000,
  InFlightIndexByJob1764490000000,
  FenceToken1764520000000,
  FinishedJobsIndex1764530000000,
  UniqueJobs1764540000000,
  CreateBackgroundSchedules1764550000000,
  Limits1764560000000,
  JobResults1764570000000,
  TraceContext1764580000000,
  DeferredWakeUps1764590000000,
  BufferedJobs1764600000000,
  Flows1764610000000,
  DurableSteps1764620000000,
  AttemptHistory1764630000000,
  SqlEnqueue1764640000000,
  Instances1764650000000,
  JobHistory1764660000000,
  FlowOperatorActions1764671390000,
  SqlEnqueueRunAt1764672000000,
  RuntimeLimits1764680000000,
  FairShare1764690000000,
  LifoQueueAfter1764700000000,
  JobLogs1764710000000,
  RicherSchedules1764720000000,
  JobEvents1764730000000,
  EventOrder1764740000000,
  NestedEventOrder1764750000000,
  FlowSettleAfterSteps1764760000000,
  HistoryReturnEvents1764770000000,
  KeyPriorities1764780000000,
];

export {
  CreateBackgroundJobs1764460000000,
  CreateBackgroundQueues1764470000000,
  DelayedJobsIndex1764480000000,
  InFlightIndexByJob1764490000000,
  FenceToken1764520000000,
  FinishedJobsIndex1764530000000,
  UniqueJobs1764540000000,
  CreateBackgroundSchedules1764550000000,
  Limits1764560000000,
  JobResults1764570000000,
  TraceContext1764580000000,
  DeferredWakeUps1764590000000,
  BufferedJobs1764600000000,
  Flows1764610000000,
  DurableSteps1764620000000,
  AttemptHistory1764630000000,
  SqlEnqueue1764640000000,
  Instances1764650000000,
  JobHistory1764660000000,
  FlowOperatorActions1764671390000,
  SqlEnqueueRunAt1764672000000,
  RuntimeLimits1764680000000,
  FairShare1764690000000,
  LifoQueueAfter1764700000000,
  JobLogs1764710000000,
  RicherSchedules1764720000000,
  JobEvents1764730000000,
  EventOrder1764740000000,
  NestedEventOrder1764750000000,
  FlowSettleAfterSteps1764760000000,
  HistoryReturnEvents1764770000000,
  KeyPriorities1764780000000,
};
