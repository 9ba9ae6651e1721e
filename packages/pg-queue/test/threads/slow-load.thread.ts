// The thread file of thread-start-deadline-processes.spec.ts: its import takes SLOW_LOAD_MS (a heavy module's load on a
// busy machine), then each job records the run it starts in thread_runs on a connection of its own, burns `burnMs` of
// CPU, and returns.
import { threadId } from 'node:worker_threads';
import type { ThreadJob } from '../../src/index.js';
import { threadDb } from './thread-db.js';

await new Promise((resolve) => setTimeout(resolve, Number(process.env.SLOW_LOAD_MS)));


export default async function (job: ThreadJob<{ burnMs?: number }>): Promise<unknown> {
  await (await threadDb()).query(`INSERT INTO thread_runs (job_id, attempt, thread_id, started_at) VALUES ($1, $2, $3, clock_timestamp())`, [job.id, job.attempt, threadId]);
  const until = Date.now() + (job.payload.burnMs ?? 0);
  let x = 0;
  while (Date.now() < until) for (let i = 0; i < 100_000; i++) x += Math.sqrt(i);
  return { threadId, x: x > 0 };
}
