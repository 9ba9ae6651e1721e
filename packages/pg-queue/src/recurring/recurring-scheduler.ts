import { Inject, Injectable, Optional, type BeforeApplicationShutdown, type OnApplicationBootstrap } from '@nestjs/common';
import { JobHandlerRegistry } from '../discovery/job-handler.registry.js';
import { MISSED_FIRES_SKIPPED, SCHEDULE_ENDED } from '../pg-queue.messages.js';
import { MAINTENANCE_JOB_STORE, MAINTENANCE_SCHEDULE_STORE } from '../pg-queue.constants.js';
import { RESOLVED_OPTIONS } from '../pg-queue.constants.js';
import type { NewJobRow } from '../store/job-store.types.js';
import { JobStore } from '../store/job.store.js';
import { ScheduleStore, type DueKey, type DueSchedule } from '../store/schedule.store.js';
import { errorLine } from '../utils/error-text.js';
import type { ResolvedModuleOptions } from '../utils/resolve-options.js';
import { RetryBackoff } from '../utils/retry-backoff.js';
import { boundPlan, firstFire, planFires, ruleOf, type Ended } from './fire-times.js';
import { mayHoldPlaceholders, placeholderValues, renderPayload } from './payload-template.js';
import { RecurringJobRegistry } from './recurring-job.registry.js';
import { PgQueueLogger } from '../utils/pg-queue-logger.js';

/** Due schedules read per scan; a full scan is followed by the next page at once. */
const SCAN_LIMIT = 100;
/** Code schedules are re-declared this often (at most a third of orphanAfterMs). */
const DECLARE_EVERY_MS = 60_000;

export interface TickResult {
  /** Fires this instance claimed (each one a compare-and-set won). */
  claimed: number;
  /** Jobs it inserted for them. */
  jobs: number;
}

/**
 * Fires recurring jobs: syncs the schedules declared in code at boot, then ticks: one query finds the due
 * schedules (database clock), the cron library plans each one's fires, and each plan is claimed by a
 * compare-and-set on the schedule row in the transaction that inserts its jobs. Every instance ticks; no
 * leader: the instance whose compare-and-set wins enqueues the fire, the others skip it. The timer sleeps
 * until the next fire (at most pollIntervalMs, so schedules made by other instances are seen); a failing
 * tick is logged once per outage and retried with backoff, never thrown at the host.
 */
@Injectable()
export class RecurringScheduler implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new PgQueueLogger('PgQueue');
  private readonly backoff: RetryBackoff;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = true;
  /** Set at shutdown: a tick in progress stops between two fires. */
  private closing = false;
  private synced = false;
  private rerun = false;
  private lastDeclaredAt = 0;
  /** Schedules whose last claim failed (logged once, until one succeeds). */
  private readonly failing = new Set<string>();

  /** The stores of the tick (boot sync, scans, fires, declarations): the maintenance pool's when the module gives them. */
  private readonly tickSchedules: ScheduleStore;
  private readonly tickJobs: JobStore;

  constructor(
    /** The API pool's stores: fireNow, called by QueueService (an app's call). */
    private readonly schedules: ScheduleStore,
    private readonly jobs: JobStore,
    private readonly declared: RecurringJobRegistry,
    private readonly handlers: JobHandlerRegistry,
    @Inject(RESOLVED_OPTIONS) protected readonly options: ResolvedModuleOptions,
    @Optional() @Inject(MAINTENANCE_SCHEDULE_STORE) tickSchedules?: ScheduleStore,
    @Optional() @Inject(MAINTENANCE_JOB_STORE) tickJobs?: JobStore,
  ) {
    this.backoff = new RetryBackoff('recurring-job scheduler', this.logger, 500, 30_000);
    this.tickSchedules = tickSchedules ?? schedules;
    this.tickJobs = tickJobs ?? jobs;
  }

  async onApplicationBootstrap(): Promise<void> {
    if (!this.options.recurring.enabled) return;
    this.stopped = false;
    // A failed first sync (database down) is retried by the loop; the app boots either way.
    try {
      await this.sync();
    } catch (error) {
      this.logger.warn(`recurring jobs: the boot sync of code schedules failed (${errorLine(error)}); retrying in the background`);
    }
    this.arm(0);
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopped = true;
    this.closing = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** Ticks now (a schedule changed through QueueService in this instance). */
  wake(): void {
    if (this.running) this.rerun = true;
    else this.arm(0);
  }

  /**
   * Upserts the code schedules in one statement (several instances booting at once each send one; an
   * unchanged schedule keeps its next fire), after reading the database clock for the first fires.
   */
  async sync(): Promise<void> {
    const declared = this.declared.all().map((d) => d.definition);
    if (declared.length > 0) {
      const nowMs = await this.tickSchedules.dbNowMs();
      const next = new Map(declared.map((d) => [d.name, firstFire(ruleOf(d), d, nowMs)]));
      const inserted = await this.tickSchedules.syncCodeSchedules(declared, next);
      this.logger.log(`recurring jobs: ${declared.length} schedule(s) declared in code, ${inserted} new`);
    }
    this.synced = true;
    this.lastDeclaredAt = Date.now();
  }

  /**
   * One scan and the claims of what is due; tests call it directly. nextInMs: until the earliest next fire,
   * the scan's (schedules not yet due) or one just planned (the scan read those as due, before they moved on).
   */
  async runOnce(): Promise<TickResult & { nextInMs: number | null }> {
    const result = { claimed: 0, jobs: 0, nextInMs: null as number | null };
    const earliest = (a: number | null, b: number | null) => (a === null ? b : b === null ? a : Math.min(a, b));
    // Keyset pages: a schedule that cannot fire (a cron the parser refuses, a claim lost) stays due, and a scan
    // that started again from the top would read it again for ever, firing nothing else. The next tick retries it.
    let after: DueKey | undefined;
    for (;;) {
      const scan = await this.tickSchedules.dueSchedules(this.options.recurring.orphanAfterMs, SCAN_LIMIT, after);
      let next = earliest(result.nextInMs, scan.nextInMs);
      for (const due of scan.due) {
        if (this.closing) break;
        const fired = await this.fire(due, scan.nowMs);
        if (fired === null) continue;
        // Won or lost, the schedule's next fire is the planned one (the winner planned the same; for an every
        // schedule the loser's guess is the earliest it can be).
        if (fired.nextFireAtMs !== null) next = earliest(next, fired.nextFireAtMs - scan.nowMs);
        if (!fired.won) continue;
        result.claimed += 1;
        result.jobs += fired.jobs;
      }
      result.nextInMs = next;
      if (scan.due.length < SCAN_LIMIT || this.closing) return result;
      after = scan.due.at(-1)!.key;
    }
  }

  /**
   * Enqueues one fire of a schedule now: the job a tick would insert for it (its payload template filled in, with
   * `_schedule`, its priority and attempts), fire time by the database clock. The schedule row is not moved and the
   * fire is not counted against its limit. The testing kit's fireSchedule; null when no schedule has that name.
   */
  async fireNow(name: string): Promise<string | null> {
    const schedule = await this.schedules.getSchedule(name, this.options.recurring.orphanAfterMs);
    if (!schedule) return null;
    const [id] = await this.jobs.insertJobs([this.jobRow(schedule, await this.schedules.dbNowMs())]);
    return id;
  }

  /** Plans and claims one due schedule; won false when another instance claimed it first; null when it failed (logged). */
  private async fire(due: DueSchedule, nowMs: number): Promise<{ won: boolean; jobs: number; nextFireAtMs: number | null } | null> {
    try {
      const result = due.everyMs !== null ? await this.fireEvery(due, due.everyMs, nowMs) : await this.fireCron(due, due.cron!, nowMs);
      if (this.failing.delete(due.name)) this.logger.log(`recurring jobs: schedule "${due.name}" fires again`);
      return result;
    } catch (error) {
      if (isConnectionError(error)) throw error;
      if (!this.failing.has(due.name)) {
        this.failing.add(due.name);
        this.logger.error(`recurring jobs: schedule "${due.name}" cannot fire: ${errorLine(error)} (retried every tick, logged once)`);
      }
      return null;
    }
  }

  /** A cron schedule: the cron library plans the fires (within the schedule's bounds), one compare-and-set claims them. */
  private async fireCron(due: DueSchedule, cron: string, nowMs: number): Promise<{ won: boolean; jobs: number; nextFireAtMs: number | null }> {
    const planned = planFires(cron, due.timeZone, due.missed, due.nextFireMs, nowMs);
    const plan = boundPlan(planned, cron, due.timeZone, due, due.fires);
    const rows = plan.fires.map((fireMs) => this.jobRow(due, fireMs));
    const won = await this.tickSchedules.claimFire(due, plan.nextFireAtMs, plan.fires.at(-1) ?? null, rows.length, (client) =>
      rows.length > 0 ? this.tickJobs.insertJobsOn(client, rows) : Promise.resolve(),
    );
    if (!won) return { won: false, jobs: 0, nextFireAtMs: plan.nextFireAtMs };
    if (planned.skippedThroughMs !== null) {
      const policy = due.missed.policy === 'window' ? `{ windowMs: ${due.missed.windowMs} }` : `'${due.missed.policy}'`;
      this.logger.warn(MISSED_FIRES_SKIPPED(due.name, new Date(due.nextFireMs).toISOString(), new Date(planned.skippedThroughMs).toISOString(), policy));
    }
    if (plan.ended) this.sayEnded(due, plan.ended, due.fires + rows.length);
    return { won: true, jobs: rows.length, nextFireAtMs: plan.nextFireAtMs };
  }

  /**
   * An `every` schedule: the claim itself makes the fire time (the database clock) and the next fire; the job is
   * built once the fire time is known, in the claim's transaction. A loser guesses the next fire one interval after
   * the scan (the earliest the winner's can be): its timer looks again no sooner, even while a winner that stalled
   * inside its transaction keeps the row locked.
   */
  private async fireEvery(due: DueSchedule, everyMs: number, nowMs: number): Promise<{ won: boolean; jobs: number; nextFireAtMs: number | null }> {
    const claimed = await this.tickSchedules.claimEveryFire(due, (client, fireMs) => this.tickJobs.insertJobsOn(client, [this.jobRow(due, fireMs)]));
    if (!claimed) return { won: false, jobs: 0, nextFireAtMs: Math.max(due.nextFireMs, nowMs) + everyMs };
    if (claimed.nextFireAtMs === null) this.sayEnded(due, claimed.limit !== null && claimed.fires >= claimed.limit ? 'limit' : 'endDate', claimed.fires);
    return { won: true, jobs: claimed.fired ? 1 : 0, nextFireAtMs: claimed.nextFireAtMs };
  }

  /** The winner of the claim that ended a schedule says so, once (every instance sees `ended` in schedules()). */
  private sayEnded(due: DueSchedule, why: Ended, fires: number): void {
    this.logger.log(SCHEDULE_ENDED(due.name, why === 'limit' ? `its limit of ${due.limit} fire(s) is reached` : `its endDate ${new Date(due.endMs!).toISOString()} is past`, fires));
  }

  private jobRow(due: Pick<DueSchedule, 'name' | 'queue' | 'payload' | 'priority' | 'maxAttempts' | 'timeZone'>, fireMs: number): NewJobRow {
    const queue = due.queue;
    const fireAt = new Date(fireMs).toISOString();
    // The payload template (README: Recurring jobs): most hold no placeholder and are copied as they are.
    const payload = mayHoldPlaceholders(JSON.stringify(due.payload)) ? renderPayload(due.payload, placeholderValues(due.name, fireMs, due.timeZone)) : due.payload;
    return {
      queue,
      payloadJson: JSON.stringify({ ...payload, _schedule: { name: due.name, fireAt } }),
      priority: due.priority,
      // As at enqueue: the schedule's own, else the module's queues option, else the queue's handler, else 5.
      maxAttempts: due.maxAttempts ?? this.options.queues[queue]?.maxAttempts ?? this.handlers.get(queue)?.options.maxAttempts ?? 5,
      // The fire time: job.runAt tells which fire this is on the first attempt; a missed fire is due at once.
      runAt: new Date(fireMs),
      delayMs: 0,
      concurrencyKey: null,
    };
  }

  private arm(delayMs: number): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.running = this.tick().finally(() => (this.running = undefined));
    }, delayMs);
  }

  private async tick(): Promise<void> {
    const poll = this.options.recurring.pollIntervalMs;
    let delay = poll;
    this.rerun = false;
    try {
      if (!this.synced) await this.sync();
      const declareEvery = Math.min(DECLARE_EVERY_MS, Math.floor(this.options.recurring.orphanAfterMs / 3));
      if (Date.now() - this.lastDeclaredAt >= declareEvery) {
        const names = this.declared.all().map((d) => d.definition.name);
        if (names.length > 0) await this.tickSchedules.touchDeclared(names);
        this.lastDeclaredAt = Date.now();
      }
      const { nextInMs } = await this.runOnce();
      if (nextInMs !== null) delay = Math.min(poll, Math.max(0, Math.ceil(nextInMs)));
      this.backoff.succeeded();
    } catch (error) {
      delay = this.backoff.failed(error);
    }
    this.arm(this.rerun ? 0 : delay);
  }
}

/** Errors of the connection or the server, as opposed to one schedule's bad data: the whole tick backs off. */
function isConnectionError(error: unknown): boolean {
  const code = (error as { code?: string }).code ?? '';
  return /^(08|57|53)/.test(code) || /connect|terminat|timeout|ECONN/i.test((error as Error).message ?? '');
}
