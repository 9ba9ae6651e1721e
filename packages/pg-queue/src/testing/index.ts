// nestjs-pg-queue/testing: helpers for testing an app's handlers and enqueues (README: Testing your
// handlers; docs/testing.md). A separate entry point: the library's main entry never loads it.
export { overrideQueueForTesting, getQueueTestKit, type QueueTestingOptions, type OverridableModuleBuilder } from './override-queue-for-testing.js';
export { QueueTestKit, QueueAssertionError, type DrainedJob, type DrainOutcome, type DrainOptions, type ExpectEnqueuedOptions } from './queue-test-kit.js';
export { createTestJob, type TestJob, type TestJobFields } from './create-test-job.js';
