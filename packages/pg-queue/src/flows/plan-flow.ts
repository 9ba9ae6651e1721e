import { PgQueueError } from '../errors/pg-queue.error.js';
import { INVALID_OPTION } from '../pg-queue.messages.js';
import type { NewJobRow } from '../store/job-store.types.js';
import { checkPayloads, validatorOf, type PayloadToCheck } from '../typed/payload-validators.js';
import { queueNameOf } from '../typed/queue-definition.js';
import { buildJobRow, type JobDefaults } from '../utils/job-row.js';
import { assertQueueName } from '../utils/resolve-options.js';
import { hasLoneSurrogate, serializePayload } from '../utils/serialize-payload.js';
import type { FlowDependency, FlowJobSpec, OnParentFailure } from './flow.interfaces.js';

/** A flow job's row: a job row with its ref, whether it starts blocked, and its compensation (JSON). */
export interface FlowRow extends NewJobRow {
  ref: string;
  blocked: boolean;
  compensateJson: string | null;
}

/** An edge by the jobs' positions in the plan (1-based, as the insert statement numbers its input rows). */
export interface FlowEdgeRow {
  parent: number;
  child: number;
  policy: OnParentFailure;
}

export interface FlowPlan {
  rows: FlowRow[];
  edges: FlowEdgeRow[];
}

/** A flow's name as enqueueFlow stores it (flows.name): absent (null), or a non-empty string of at most 200 characters PostgreSQL can store. */
export function checkFlowName(method: string, name: unknown): string | null {
  if (name === undefined || name === null) return null;
  if (typeof name !== 'string' || name.length === 0 || name.length > 200 || hasLoneSurrogate(name) || name.includes('\0')) {
    throw new PgQueueError(INVALID_OPTION(method, 'name', name, 'a non-empty string of at most 200 characters'));
  }
  return name;
}

/** At most this many jobs per enqueueFlow or spawn call (one statement). */
export const MAX_FLOW_JOBS = 50_000;
/** At most this much payload (JSON text, compensations included) per call: one statement carries it all. */
export const MAX_FLOW_PAYLOAD_CHARS = 64 * 1_048_576;
const REF_PATTERN = /^[A-Za-z0-9_.:-]{1,128}$/;
const POLICIES: readonly OnParentFailure[] = ['fail', 'cancel', 'continue'];
const JOB_KEYS = new Set(['ref', 'queue', 'payload', 'dependsOn', 'compensate', 'runAt', 'delayMs', 'priority', 'maxAttempts', 'concurrencyKey', 'uniqueKey']);

/**
 * Checks a flow (or a job's spawned children) and builds its rows, before anything is stored: every error names
 * the ref. Refs unique; dependsOn names refs of the same call; no cycle (the one found is named); a unique key only
 * on a job without parents (a blocked job cannot hold a key: see the guide); payloads JSON and, for a typed queue,
 * accepted by its validator.
 */
export async function planFlow(
  method: string,
  jobs: readonly FlowJobSpec[],
  maxPayloadBytes: number,
  defaults: JobDefaults,
): Promise<FlowPlan> {
  if (!Array.isArray(jobs) || jobs.length === 0) throw new PgQueueError(`${method} needs a non-empty array of jobs ({ ref, queue, payload, dependsOn? }).`);
  if (jobs.length > MAX_FLOW_JOBS) throw new PgQueueError(`${method}: ${jobs.length} jobs; at most ${MAX_FLOW_JOBS} per call.`);
  const position = new Map<string, number>();
  jobs.forEach((job, i) => {
    if (job === null || typeof job !== 'object') throw new PgQueueError(`${method}: job #${i} must be an object { ref, queue, payload, ... }.`);
    const unknownKey = Object.keys(job).find((key) => !JOB_KEYS.has(key));
    if (typeof job.ref !== 'string' || !REF_PATTERN.test(job.ref)) {
      throw new PgQueueError(`${method}: job #${i} has ref ${JSON.stringify(job.ref)}; a ref is 1 to 128 characters from A-Z a-z 0-9 _ . : -`);
    }
    if (unknownKey !== undefined) throw new PgQueueError(`${method}: job "${job.ref}": unknown option "${unknownKey}"; known options: ${[...JOB_KEYS].join(', ')}.`);
    if (position.has(job.ref)) throw new PgQueueError(`${method}: two jobs have the ref "${job.ref}"; refs must be unique in a flow.`);
    position.set(job.ref, i);
  });

  const edges: FlowEdgeRow[] = [];
  const parentsOf: number[][] = jobs.map(() => []);
  jobs.forEach((job, i) => {
    if (job.dependsOn === undefined) return;
    if (!Array.isArray(job.dependsOn)) throw new PgQueueError(`${method}: job "${job.ref}": dependsOn must be an array of refs.`);
    const seen = new Set<string>();
    for (const dependency of job.dependsOn as FlowDependency[]) {
      const { ref, policy } = readDependency(method, job.ref, dependency);
      const parent = position.get(ref);
      if (parent === undefined) throw new PgQueueError(`${method}: job "${job.ref}" depends on "${ref}", which is not a job of this ${method === 'spawn' ? 'spawn' : 'flow'}.`);
      if (seen.has(ref)) throw new PgQueueError(`${method}: job "${job.ref}" depends on "${ref}" twice.`);
      seen.add(ref);
      parentsOf[i].push(parent);
      edges.push({ parent: parent + 1, child: i + 1, policy });
    }
  });
  const cycle = findCycle(parentsOf);
  if (cycle) throw new PgQueueError(`${method}: the dependencies form a cycle: ${cycle.map((i) => `"${jobs[i].ref}"`).join(' -> ')}.`);

  const rows = jobs.map((job, i): FlowRow => {
    const blocked = parentsOf[i].length > 0;
    if (blocked && job.uniqueKey !== undefined) {
      throw new PgQueueError(`${method}: job "${job.ref}" has a uniqueKey and parents; only a job without dependsOn can hold a unique key.`);
    }
    let row: NewJobRow;
    try {
      row = buildJobRow(job, maxPayloadBytes, defaults);
    } catch (error) {
      if (error instanceof PgQueueError) throw new PgQueueError(`${method}: job "${job.ref}": ${error.message}`, { cause: error });
      throw error;
    }
    return { ...row, ref: job.ref, blocked, compensateJson: compensation(method, job, maxPayloadBytes, defaults) };
  });

  const chars = rows.reduce((n, r) => n + r.payloadJson.length + (r.compensateJson?.length ?? 0), 0);
  if (chars > MAX_FLOW_PAYLOAD_CHARS) throw new PgQueueError(`${method}: the payloads total ${chars} characters of JSON; at most ${MAX_FLOW_PAYLOAD_CHARS} (64 MiB) per call, which is one statement.`);

  const checks: PayloadToCheck[] = [];
  rows.forEach((row, i) => {
    const validate = validatorOf(row.queue);
    if (validate) checks.push({ queue: row.queue, payload: jobs[i].payload, validate, index: i });
    const compensate = jobs[i].compensate;
    if (compensate) {
      const queue = queueNameOf(compensate.queue);
      const validateCompensation = validatorOf(queue);
      if (validateCompensation) checks.push({ queue, payload: compensate.payload, validate: validateCompensation, index: i });
    }
  });
  if (checks.length > 0) await checkPayloads(method, checks);
  return { rows, edges };
}

function readDependency(method: string, ref: string, dependency: FlowDependency): { ref: string; policy: OnParentFailure } {
  if (typeof dependency === 'string') return { ref: dependency, policy: 'fail' };
  if (dependency !== null && typeof dependency === 'object' && typeof dependency.ref === 'string') {
    const policy = dependency.onFailure ?? 'fail';
    if (!POLICIES.includes(policy)) throw new PgQueueError(`${method}: job "${ref}": onFailure ${JSON.stringify(policy)} for "${dependency.ref}"; expected one of ${POLICIES.join(', ')}.`);
    return { ref: dependency.ref, policy };
  }
  throw new PgQueueError(`${method}: job "${ref}": each dependsOn entry is a ref or { ref, onFailure }; got ${JSON.stringify(dependency)}.`);
}

/** The compensation as stored on the job ({queue, payload, maxAttempts, priority}), its options checked as enqueue's. */
function compensation(method: string, job: FlowJobSpec, maxPayloadBytes: number, defaults: JobDefaults): string | null {
  const compensate = job.compensate;
  if (compensate === undefined) return null;
  if (compensate === null || typeof compensate !== 'object') throw new PgQueueError(`${method}: job "${job.ref}": compensate must be { queue, payload, maxAttempts?, priority? }.`);
  const queue = queueNameOf(compensate.queue);
  try {
    assertQueueName(queue);
  } catch (error) {
    throw new PgQueueError(`${method}: job "${job.ref}": compensate: ${(error as Error).message}`, { cause: error });
  }
  const row = buildJobRow({ queue, payload: compensate.payload, maxAttempts: compensate.maxAttempts, priority: compensate.priority }, maxPayloadBytes, defaults);
  return `{"queue":${JSON.stringify(queue)},"payload":${serializePayload(queue, compensate.payload, maxPayloadBytes)},"maxAttempts":${row.maxAttempts},"priority":${row.priority}}`;
}

/** A cycle of the dependency graph as positions (first repeated at the end), or null: an iterative depth-first walk. */
function findCycle(parentsOf: number[][]): number[] | null {
  const state = new Uint8Array(parentsOf.length); // 0 new, 1 on the path, 2 done
  for (let start = 0; start < parentsOf.length; start++) {
    if (state[start] !== 0) continue;
    const path: number[] = [start];
    const next: number[] = [0];
    state[start] = 1;
    while (path.length > 0) {
      const node = path[path.length - 1];
      const k = next[next.length - 1]++;
      if (k < parentsOf[node].length) {
        const parent = parentsOf[node][k];
        if (state[parent] === 1) return [...path.slice(path.indexOf(parent)), parent].reverse();
        if (state[parent] === 0) {
          state[parent] = 1;
          path.push(parent);
          next.push(0);
        }
      } else {
        state[node] = 2;
        path.pop();
        next.pop();
      }
    }
  }
  return null;
}
