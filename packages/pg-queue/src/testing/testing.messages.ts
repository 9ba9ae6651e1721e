// Error texts of the testing kit, kept beside it (the main entry's pg-queue.messages.ts never loads them).

export const NOT_A_TESTING_APP = () =>
  'getQueueTestKit: this app was not built with overrideQueueForTesting(). Build it as ' +
  '`overrideQueueForTesting(Test.createTestingModule({ imports: [AppModule] }), { mode: "manual" }).compile()`.';

export const BAD_TESTING_MODE = (mode: unknown) => `overrideQueueForTesting: mode must be "manual" or "inline", got ${JSON.stringify(mode)}.`;

export const NO_HANDLER_FOR = (queue: string, known: string[]) =>
  `drain: no @JobHandler handles queue "${queue}" in this app (handlers: ${known.length ? known.map((q) => `"${q}"`).join(', ') : 'none'}).`;

export const DRAIN_LIMIT = (limit: number, queues: string[]) =>
  `drain ran ${limit} jobs (${queues.join(', ')}) and jobs are still due: a handler that keeps enqueueing, retrying or ` +
  `snoozing with no delay? Raise { maxJobs } if this many is expected.`;

export const BAD_DRAIN_OPTION = (key: string, value: unknown, expected: string) => `drain: ${key} must be ${expected}, got ${JSON.stringify(value)}.`;

export const NO_SCHEDULE = (name: string, known: string) => `fireSchedule: no recurring schedule is named "${name}" (schedules: ${known || 'none'}).`;
