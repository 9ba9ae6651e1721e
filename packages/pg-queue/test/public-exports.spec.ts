// The public surface is what the README and docs/ document (issue 41): the runtime exports of the main entry point are
// exactly the names below, and each of them is named in README.md or docs/. A new export fails here until it is
// documented and listed; an internal goes to src/internal.ts (not in package.json `exports`) instead. Types leave no
// runtime trace: TypeDoc (npm run docs:check) checks that every type a public signature names is exported. No database.
import { describe, expect, it } from '@jest/globals';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as api from '../src/index.js';

const DOCUMENTED = [
  'PgQueueModule',
  'QueueService',
  'InjectQueueService',
  'InjectJobEvents',
  'getQueueServiceToken',
  'getJobEventsToken',
  'getQueueConnectionToken',
  'defineQueue',
  'JobHandler',
  'OnJobEvent',
  'RecurringJob',
  'JobEvents',
  'JOB_EVENT_NAMES',
  'QUEUE_EVENT_TYPES',
  'compareEventIds',
  'MAX_PROGRESS_BYTES',
  'exponentialBackoff',
  'PgQueueError',
  'JobTimeoutError',
  'JobAbortedError',
  'JobSnoozedError',
  'RateLimitedError',
  'JobFailedError',
  'JobWaitTimeoutError',
  'InvalidPayloadError',
  'BackgroundJobEntity',
  'PG_QUEUE_MIGRATIONS',
  'CreateBackgroundJobs1764460000000',
  'CreateBackgroundQueues1764470000000',
  'DelayedJobsIndex1764480000000',
  'InFlightIndexByJob1764490000000',
  'FenceToken1764520000000',
  'FinishedJobsIndex1764530000000',
  'UniqueJobs1764540000000',
  'CreateBackgroundSchedules1764550000000',
  'Limits1764560000000',
  'JobResults1764570000000',
  'TraceContext1764580000000',
  'DeferredWakeUps1764590000000',
  'BufferedJobs1764600000000',
  'Flows1764610000000',
  'DurableSteps1764620000000',
  'AttemptHistory1764630000000',
  'SqlEnqueue1764640000000',
  'Instances1764650000000',
  'JobHistory1764660000000',
  'SqlEnqueueRunAt1764672000000',
  'RuntimeLimits1764680000000',
  'FairShare1764690000000',
  'LifoQueueAfter1764700000000',
  'JobLogs1764710000000',
  'RicherSchedules1764720000000',
  'JobEvents1764730000000',
  'EventOrder1764740000000',
  'NestedEventOrder1764750000000',
  'FlowSettleAfterSteps1764760000000',
  'HistoryReturnEvents1764770000000',
  'KeyPriorities1764780000000',
];

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../../..');

/** README.md and every page of docs/ but the generated API reference. */
function docsText(): string {
  const pages = [join(ROOT, 'README.md')];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (path !== join(ROOT, 'docs/api')) walk(path);
      } else if (entry.name.endsWith('.md')) pages.push(path);
    }
  };
  walk(join(ROOT, 'docs'));
  return pages.map((page) => readFileSync(page, 'utf8')).join('\n');
}

describe('the public entry point', () => {
  it('exports exactly the documented names', () => {
    expect(Object.keys(api).sort()).toEqual([...DOCUMENTED].sort());
  });

  it('documents every name it exports, in README.md or docs/', () => {
    const text = docsText();
    const undocumented = DOCUMENTED.filter((name) => !new RegExp(`\\b${name}\\b`).test(text));
    expect(undocumented).toEqual([]);
  });

  it('keeps the internals entry point out of package.json exports', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'packages/pg-queue/package.json'), 'utf8')) as { exports: Record<string, unknown> };
    expect(Object.keys(pkg.exports).some((key) => key.includes('internal'))).toBe(false);
  });
});
