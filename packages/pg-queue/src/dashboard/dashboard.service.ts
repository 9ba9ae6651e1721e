import { DEFAULT_JOB_LIST_ORDER, type JobListOrder } from '../store/job-list-order.js';
import { QueueDatabases } from '../databases/queue-databases.js';
import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import type { FlowStatus } from '../flows/flow.interfaces.js';
import type { JobStatus, QueueStats } from '../interfaces/job.interface.js';
import { QueueService } from '../queue.service.js';
import type { QueueLimits, QueueLimitsChange } from '../limits/queue-limits.js';
import type { JobFilter } from '../store/admin.store.js';
import { DashboardStore, FLOW_JOB_COUNT_CAP, SCHEDULED_COUNT_CAP, type AttemptHistoryRow, type DashboardAction, type DashboardQueries, type JobFlowRow, type JobListRow } from '../store/dashboard.store.js';
import { actionStatuses } from './dashboard-actions.js';
import type { AddJobForm, AddJobInput } from './dashboard-add-job.js';
import { scheduleFormOf, type ScheduleEdit, type ScheduleForm } from './dashboard-schedule-form.js';
import type { ScheduleInfo } from '../interfaces/recurring-job.interface.js';
import type { EnqueueResult } from '../interfaces/enqueue.interface.js';
import type { Viewer } from './dashboard-auth.js';
import { DASHBOARD_OPTIONS } from './dashboard.constants.js';
import type { ResolvedDashboardOptions } from './resolve-dashboard-options.js';
import type { MinuteBucket } from './views/chart.js';
import { GRAPH_EDGE_CAP, GRAPH_NODE_CAP } from './views/flow-graph.js';
import type { FlowData } from './views/flow.view.js';
import type { FlowsData } from './views/flows.view.js';
import type { JobsData } from './views/jobs.view.js';
import type { DashboardCounts, ListedStatus, OverviewData } from './views/overview.view.js';
import type { InstancesData } from './views/instances.view.js';
import type { QueueData } from './views/queue.view.js';
import type { ScheduleAction } from './views/confirm-questions.js';
import { stalledInstances, unservedQueues } from '../store/instance.store.js';
import type { WaitExplanation } from '../waiting/wait-reasons.js';
import { PgQueueLogger } from '../utils/pg-queue-logger.js';
import { INT8_MAX, isBigintId } from '../utils/bigint-id.js';
import { eventsPage, jobEvents, type EventsQuery } from './dashboard-events.js';
import type { JobEventsData } from './views/event-rows.view.js';
import type { EventsData } from './views/events.view.js';
import { fairnessOption, queueWeights } from './dashboard-fairness.js';

/** Rows one action statement changes at most: its row locks last one batch. */
const ACTION_BATCH = 500;
/** A bulk action stops after this long and says how far it got (the operator runs it again for the rest). */
const ACTION_BUDGET_MS = 5_000;

const ACTION_VERB: Record<DashboardAction, string> = { retry: 'retried', cancel: 'cancelled', delete: 'deleted', 'run-now': 'made due now' };

export interface ActionOutcome {
  changed: number;
  /** The bulk action ran out of its time budget: more jobs may match. */
  more: boolean;
  /** A retry's jobs of flows left as they were because a parent has not completed or is gone, with that parent. */
  waiting: { id: string; parent: string }[];
}

/** What the pages show and what the actions do; HTTP, access and rendering stay in the controller. */
@Injectable()
export class DashboardService implements OnApplicationShutdown {
  private readonly logger = new PgQueueLogger('PgQueueDashboard');

  constructor(
    private readonly store: DashboardStore,
    private readonly queue: QueueService,
    @Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions,
    private readonly databases: QueueDatabases,
  ) {
    databases.addDashboard(options.database, options.path);
  }

  /** The app's dashboards, one per database, when it has more than one (each page links to the others); else none. */
  dashboards(): { database: string; path: string }[] {
    const all = this.databases.dashboards();
    return all.length > 1 ? all : [];
  }

  async onApplicationShutdown(): Promise<void> {
    await this.store.close();
  }

  /**
   * The instances registry, the queues with queued jobs that no live instance serves, and the live instances that
   * have not claimed a queue with due jobs for their bound (stalledInstances).
   */
  async instances(): Promise<InstancesData> {
    return this.store.read(async (q) => {
      const instances = await q.instances();
      const counts = await q.countByStatus();
      const queued = Object.keys(counts).filter((n) => counts[n].queued > 0).sort();
      const due = [...(await q.oldestDue(queued))].filter(([, ms]) => ms !== null).map(([name]) => name);
      return { instances, unserved: unservedQueues(queued, instances), stalled: stalledInstances(due, instances) };
    });
  }

  /** The auto-refresh's read: counts by queue and status (exact below a cap, estimated above), queued split into due and scheduled. */
  async summary(): Promise<{ counts: Record<string, DashboardCounts>; at: string }> {
    const counts = await this.store.read(async (q) => splitQueued(q, await q.countByStatus()));
    return { counts, at: new Date().toISOString() };
  }

  async overview(): Promise<OverviewData> {
    // The chart (the costlier read) on the pool's second connection, while the first reads the counts.
    const [{ counts, paused, oldest, instances }, chart] = await Promise.all([
      this.store.read(async (q) => {
        const counts = await splitQueued(q, await q.countByStatus());
        const paused = new Set(await q.pausedQueues());
        const oldest = await q.oldestDue(Object.keys(counts).filter((n) => counts[n].queued > 0));
        const instances = await q.instances();
        return { counts, paused, oldest, instances };
      }),
      this.store.read((q) => q.finishedPerMinute()),
    ]);
    const served = new Set(instances.filter((i) => i.live).flatMap((i) => i.queues.map((x) => x.queue)));
    const stalled = stalledInstances([...oldest].filter(([, ms]) => ms !== null).map(([name]) => name), instances);
    const names = [...new Set([...Object.keys(counts), ...paused, ...chart.minutes.map((m) => m.queue_name)])].sort();
    const minutes = new Map<string, MinuteBucket[]>(names.map((n) => [n, Array.from({ length: 60 }, () => ({ completed: 0, failed: 0 }))]));
    for (const m of chart.minutes) {
      if (m.minutes_ago < 0 || m.minutes_ago > 59) continue;
      minutes.get(m.queue_name)![59 - m.minutes_ago][m.status] += m.n;
    }
    return {
      chartCapped: chart.capped,
      queues: names.map((name) => ({
        name,
        counts: counts[name] ?? { queued: 0, due: 0, scheduled: 0, blocked: 0, processing: 0, completed: 0, failed: 0, cancelled: 0 },
        oldestDueMs: oldest.get(name) ?? null,
        paused: paused.has(name),
        served: served.has(name),
        stalledBy: stalled.filter((x) => x.queue === name).map((x) => x.id),
        minutes: minutes.get(name)!,
      })),
    };
  }

  /**
   * A queue's page: its counts, paused or not, its oldest due job's wait, the instances that serve it, and its finished
   * jobs' throughput, wait and run percentiles over the last hour and day (on the pool's second connection, as the
   * overview's chart).
   */
  async queuePage(name: string): Promise<QueueData> {
    const [head, times, limits] = await Promise.all([
      this.store.read(async (q) => {
        const counts = (await splitQueued(q, await q.countByStatus()))[name] ?? null;
        const paused = (await q.pausedQueues()).includes(name);
        const oldestDueMs = counts && counts.queued > 0 ? ((await q.oldestDue([name])).get(name) ?? null) : null;
        const instances = (await q.instances()).filter((i) => i.queues.some((x) => x.queue === name));
        const installed = await q.events.installed();
        const events = { installed, recording: installed && (await q.events.recordingQueues()).includes(name) };
        return { counts, paused, oldestDueMs, instances, events, weights: await queueWeights(q, name, fairnessOption(this.databases, this.options.database, name)) };
      }),
      this.store.read((q) => q.queueTimes(name)),
      this.queue.getQueueLimits(name),
    ]);
    return { name, ...head, times, limits };
  }

  /** A page of recorded events, newest first (dashboard-events.ts); a failure's error only without hidePayloads. */
  events(query: EventsQuery): Promise<EventsData> {
    return this.store.read((q) => eventsPage(q, query, this.options.pageSize, !this.options.hidePayloads));
  }

  /** The queue starts or stops recording events (QueueService.recordEvents); returns the recording queues. */
  async recordEvents(viewer: Viewer, queue: string, on: boolean): Promise<string[]> {
    const recording = await this.queue.recordEvents(queue, on);
    this.logger.log(`${who(viewer)} ${on ? 'started' : 'stopped'} recording the events of queue ${queue}`);
    return recording;
  }

  /** Stores one key's fair share weight (null: removes it) through QueueService.setFairnessWeights, which checks it. */
  async setWeight(viewer: Viewer, queue: string, key: string, weight: number | null): Promise<void> {
    await this.queue.setFairnessWeights(queue, { [key]: weight });
    this.logger.log(`${who(viewer)} ${weight === null ? `removed the stored weight of key ${JSON.stringify(key)}` : `set the weight of key ${JSON.stringify(key)} to ${weight}`} in queue ${queue}`);
  }

  /**
   * The jobs list: a lookup (an id, or a unique key), or a keyset page of the filter, newest first; `text` searches
   * payloads and errors within the page's ids (never with hidePayloads: the search would tell what they hold).
   */
  async jobs(filter: { queue: string | null; status: ListedStatus | null; search: string | null; text: string | null }, before: string | null, order: JobListOrder = DEFAULT_JOB_LIST_ORDER, after: string | null = null): Promise<JobsData> {
    const { queue, status, search } = filter;
    const text = this.options.hidePayloads ? null : filter.text;
    const withPayload = !this.options.hidePayloads;
    return this.store.read(async (q) => {
      if (search) {
        let rows: JobListRow[] = [];
        // An id: the page before id + 1, which is the job itself if it exists. Past int8 no job has it; at the largest
        // int8 the newest job is the only one it can be (id + 1 would overflow: a 500 once).
        if (isBigintId(search)) {
          const before = BigInt(search) < INT8_MAX ? String(BigInt(search) + 1n) : null;
          rows = (await q.listJobs({ queue: null, status: null, before, limit: 1, withPayload })).rows.filter((r) => r.id === search);
        }
        if (rows.length === 0) rows = await q.findByUniqueKey(search, queue, withPayload);
        return { queue, status, search, text: null, order, rows, nextBefore: null, nextAfter: null, scanned: null, stoppedEarly: false, first: true };
      }
      const when = status === 'due' || status === 'scheduled' ? status : null;
      const page = await q.listJobs({ queue, status: when ? 'queued' : (status as JobStatus | null), when, text, before, order, after, limit: this.options.pageSize, withPayload });
      const { rows, nextBefore, nextAfter, scanned, stoppedEarly } = page;
      return { queue, status, search: null, text, order, rows, nextBefore, nextAfter, scanned, stoppedEarly, first: before === null && after === null };
    });
  }

  /** The job's row and, for a job of a flow, its flow (and what it waits for when blocked). */
  job(id: string): Promise<{ row: Record<string, unknown>; now: Date; flow: JobFlowRow | null; attempts: AttemptHistoryRow[]; why: WaitExplanation | null; events: JobEventsData | null } | null> {
    return this.store.read(async (q) => {
      const found = await q.jobDetail(id);
      if (!found) return null;
      const flowId = found.row.flow_id;
      const flow = flowId === null || flowId === undefined ? null : await q.jobFlow(String(flowId), id);
      // Only a job that ever failed has attempts recorded (its last_error is set from then on).
      const attempts = found.row.last_error === null || found.row.last_error === undefined ? [] : await q.jobAttempts(id);
      // A job that waits (queued, blocked, read ahead) says why; a running or finished one needs no explaining.
      const waits = found.row.status === 'queued' || found.row.status === 'blocked' || (found.row.status === 'processing' && found.row.buffered === true);
      const why = waits ? await q.whyNotRunning(id) : null;
      const events = await jobEvents(q, found.row, !this.options.hidePayloads);
      return { ...found, flow, attempts, why, events };
    });
  }

  /** A keyset page of flows, newest first. */
  async flows(status: FlowStatus | null, before: string | null): Promise<FlowsData> {
    const page = await this.store.read((q) => q.listFlows(status, before, this.options.pageSize));
    return { status, rows: page.rows, nextBefore: page.nextBefore, scanned: page.scanned, first: before === null };
  }

  /**
   * A flow's page: its row with its jobs counted by status, the first GRAPH_NODE_CAP jobs and the edges between them
   * for the drawing, and one page of its jobs (after job id `after`) for the table. Each read is bounded, however
   * many jobs the flow has.
   */
  flow(id: string, after: string | null): Promise<FlowData | null> {
    return this.store.read(async (q) => {
      const flow = await q.flowHeader(id);
      if (!flow) return null;
      const first = await q.flowJobs(id, '0', GRAPH_NODE_CAP + 1);
      const drawn = first.slice(0, GRAPH_NODE_CAP);
      const edges = drawn.length > 1 ? await q.flowEdges(drawn.map((j) => j.id), GRAPH_EDGE_CAP + 1) : [];
      const counted = Object.values(flow.counts).reduce((sum, n) => sum + (n ?? 0), 0);
      // One row past the page: a next page is offered only when there is one.
      const read = await q.flowJobs(id, after ?? '0', this.options.pageSize + 1);
      const rows = read.slice(0, this.options.pageSize);
      return {
        flow,
        drawing: {
          jobs: drawn,
          edges: edges.slice(0, GRAPH_EDGE_CAP),
          // Past the count's cap the total is a floor: "over N more".
          total: flow.capped ? FLOW_JOB_COUNT_CAP : Math.max(counted, first.length),
          capped: flow.capped,
          edgesCapped: edges.length > GRAPH_EDGE_CAP,
        },
        page: { rows, after: after ?? '0', nextAfter: read.length > rows.length ? rows[rows.length - 1].id : null },
      };
    });
  }

  /** Cancels an unfinished flow (FlowStore.cancelFlow, one statement); logged with who did it. Null: no such flow, or it had finished. */
  async cancelFlow(viewer: Viewer, id: string): Promise<{ cancelled: number; signalled: number } | null> {
    const outcome = await this.store.write((q) => q.cancelFlow(id));
    this.logger.log(
      outcome
        ? `${who(viewer)} cancelled flow ${id} (${outcome.cancelled} job${outcome.cancelled === 1 ? '' : 's'} cancelled, ${outcome.signalled} running one${outcome.signalled === 1 ? '' : 's'} told to abort)`
        : `${who(viewer)} asked to cancel flow ${id}: no such flow, or it had finished`,
    );
    return outcome;
  }

  schedules() {
    return this.queue.schedules();
  }

  /**
   * Enqueues a copy of job `id`: its queue, payload, priority and max attempts, due now; not its unique key (the copy
   * would be refused as a duplicate), steps, progress or result. A job of a flow is not copied: its place in the flow
   * cannot be. Null: no such job.
   */
  async duplicate(viewer: Viewer, id: string): Promise<{ copy: string } | { refused: string } | null> {
    const found = await this.store.read((q) => q.jobDetail(id));
    if (!found) return null;
    const { row } = found;
    if (row.flow_id !== null && row.flow_id !== undefined) return { refused: `job ${id} belongs to flow ${String(row.flow_id)}: a copy would have no place in it` };
    const copy = await this.queue.enqueue(String(row.queue_name), row.payload, { priority: Number(row.priority), maxAttempts: Number(row.max_attempts) });
    this.logger.log(`${who(viewer)} duplicated job ${id} as job ${copy} (queue ${String(row.queue_name)})`);
    return { copy };
  }

  /**
   * Adds a job from the dashboard's form, through QueueService.enqueue (enqueueUnique with a unique key), so it is
   * checked as an app's call is, by a typed queue's validator too: a refused job throws and nothing is stored.
   */
  async addJob(viewer: Viewer, input: AddJobInput): Promise<EnqueueResult> {
    const { queue, payload, options } = input;
    const result = options.uniqueKey !== undefined ? await this.queue.enqueueUnique(queue, payload, { ...options, uniqueKey: options.uniqueKey }) : { id: await this.queue.enqueue(queue, payload, options), duplicate: false, replaced: false };
    this.logger.log(`${who(viewer)} ${result.duplicate ? `added no job (job ${result.id} holds the unique key)` : `added job ${result.id}`} to queue ${queue}`);
    return result;
  }

  /** The add-job form filled from job `id` (its queue, payload, priority and max attempts); null: no such job. */
  async jobForm(id: string): Promise<AddJobForm | null> {
    const found = await this.store.read((q) => q.jobDetail(id));
    if (!found) return null;
    const { row } = found;
    return { queue: String(row.queue_name), payload: JSON.stringify(row.payload, null, 2), priority: String(row.priority), maxAttempts: String(row.max_attempts) };
  }

  /**
   * An action on one job (`ids`) or on every job of a filter, in batches of ACTION_BATCH rows, each its own
   * short transaction, for at most ACTION_BUDGET_MS; logged with who did it and how many jobs it changed.
   */
  async act(viewer: Viewer, action: DashboardAction, target: { ids?: string[]; queue?: string | null; status?: ListedStatus | null }): Promise<ActionOutcome> {
    const when = target.status === 'due' || target.status === 'scheduled' ? target.status : undefined;
    const statuses = actionStatuses(action, target.status ?? null);
    const filter: JobFilter = { ids: target.ids, queue: target.queue ?? undefined, statuses, when };
    let changed = 0;
    let more = false;
    const waiting: { id: string; parent: string }[] = [];
    if (statuses.length > 0) {
      const deadline = Date.now() + ACTION_BUDGET_MS;
      for (let after = '0'; ; ) {
        const batch = await this.store.write((q) => q.actionBatch(action, filter, after, ACTION_BATCH));
        changed += batch.changed;
        waiting.push(...(batch.waiting ?? []));
        if (batch.lastId === null || batch.seen < ACTION_BATCH) break;
        after = batch.lastId;
        if (Date.now() > deadline) {
          more = true;
          break;
        }
      }
    }
    const what = target.ids ? (target.ids.length === 1 ? `job ${target.ids[0]}` : `jobs ${target.ids.join(', ')}`) : `jobs of ${target.queue ? `queue ${target.queue}` : 'every queue'}${target.status ? ` with status ${target.status}` : ''}`;
    this.logger.log(`${who(viewer)} ${ACTION_VERB[action]} ${changed} job${changed === 1 ? '' : 's'} (${action} on ${what}${more ? '; stopped at the time budget, more may match' : ''})`);
    return { changed, more, waiting };
  }

  async queueAction(viewer: Viewer, queue: string, action: 'pause' | 'resume'): Promise<void> {
    if (action === 'pause') await this.queue.pause(queue);
    else await this.queue.resume(queue);
    this.logger.log(`${who(viewer)} ${action}d queue ${queue}`);
  }

  /** Changes a queue's limits at runtime (the queue page's form); QueueService checks them before anything is stored. */
  async setLimits(viewer: Viewer, queue: string, change: QueueLimitsChange): Promise<QueueLimits> {
    const limits = await this.queue.setQueueLimits(queue, change);
    this.logger.log(`${who(viewer)} changed the limits of queue ${queue}: ${JSON.stringify(change)}`);
    return limits;
  }

  /** The schedule as stored, and its edit form filled from it; null: no such schedule. */
  async scheduleForm(name: string): Promise<{ source: string; form: ScheduleForm } | null> {
    const found = await this.queue.schedule(name);
    return found ? { source: found.source, form: scheduleFormOf(found) } : null;
  }

  /**
   * Changes a schedule from the edit form through QueueService.upsertSchedule (the path of `pg-queue schedules set`,
   * with its checks), then pauses or resumes it as the form asks (an upsert keeps the paused flag as it was).
   */
  async editSchedule(viewer: Viewer, edit: ScheduleEdit): Promise<ScheduleInfo> {
    let info = await this.queue.upsertSchedule(edit.spec);
    if (edit.paused !== info.paused) {
      if (edit.paused) await this.queue.pauseSchedule(info.name);
      else await this.queue.resumeSchedule(info.name);
      info = (await this.queue.schedule(info.name)) ?? info;
    }
    this.logger.log(`${who(viewer)} changed schedule ${info.name}: ${info.every !== null ? `every ${info.every} ms` : `cron ${info.cron} (${info.timeZone})`} into queue ${info.queue}${info.paused ? ', paused' : ''}`);
    return info;
  }

  /** Pause, resume, fire now or remove a schedule (QueueService's methods); false: no such schedule. `fire` returns the job's id. */
  async scheduleAction(viewer: Viewer, name: string, action: ScheduleAction): Promise<{ found: boolean; job?: string }> {
    let found: boolean;
    let job: string | undefined;
    if (action === 'fire') {
      job = (await this.queue.fireSchedule(name)) ?? undefined;
      found = job !== undefined;
    } else if (action === 'remove') found = await this.queue.removeSchedule(name);
    else found = action === 'pause' ? await this.queue.pauseSchedule(name) : await this.queue.resumeSchedule(name);
    const did = { pause: 'paused', resume: 'resumed', fire: 'fired', remove: 'removed' }[action];
    this.logger.log(`${who(viewer)} ${did} schedule ${name}${job ? ` (job ${job})` : ''}${found ? '' : ' (no such schedule)'}`);
    return { found, job };
  }

}

/**
 * Each queue's counts with its queued jobs split into due (run_at reached, and every buffered one) and scheduled
 * (run_at ahead). Past SCHEDULED_COUNT_CAP the scheduled count is a floor, and both halves are marked estimates.
 */
async function splitQueued(q: DashboardQueries, counts: QueueStats): Promise<Record<string, DashboardCounts>> {
  const scheduled = await q.scheduledCounts(Object.keys(counts).filter((n) => counts[n].queued > 0));
  const out: Record<string, DashboardCounts> = {};
  for (const [name, c] of Object.entries(counts)) {
    const later = Math.min(scheduled.get(name) ?? 0, c.queued);
    const approximate = new Set<ListedStatus>(c.approximate ?? []);
    if (approximate.has('queued') || (scheduled.get(name) ?? 0) > SCHEDULED_COUNT_CAP) approximate.add('due').add('scheduled');
    out[name] = { ...c, due: c.queued - later, scheduled: later, ...(approximate.size ? { approximate: [...approximate] } : {}) };
  }
  return out;
}

function who(viewer: Viewer): string {
  return viewer.user ? `user ${JSON.stringify(viewer.user)}` : 'an anonymous user';
}
