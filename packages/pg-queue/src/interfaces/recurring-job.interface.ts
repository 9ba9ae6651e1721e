import type { JobHandlerOptions } from './job-handler-options.interface.js';

/**
 * What a schedule does with fire times that passed while no instance was ticking (downtime). A fire is on
 * time while it is the latest due fire and at most one minute late; any other due fire was missed.
 * - 'skip' (default, as cron does): missed fires are dropped; the schedule goes on from the next fire.
 * - 'latest': one job, for the latest due fire (so a downtime costs at most one run, never zero).
 * - { windowMs }: a job for every missed fire at most windowMs old (at most 1,000 per catch-up, the latest).
 */
export type MissedFires = 'skip' | 'latest' | { windowMs: number };

/** A schedule's definition: QueueService.upsertSchedule, and @RecurringJob (cron given apart). */
export interface ScheduleOptions {
  /** IANA time zone the cron expression is read in (DST as cron-parser does it: see README). Default 'UTC'. */
  timeZone?: string;
  /** A JSON object; each fired job's payload is this object plus `_schedule: { name, fireAt }`. Default {}. */
  payload?: Record<string, unknown>;
  /** Default 'skip'. */
  missedFires?: MissedFires;
  /** Priority of each fired job. Default 0. */
  priority?: number;
}

/** `@RecurringJob(cron, options)`: a schedule, plus the options of the handler the method becomes. */
export interface RecurringJobOptions extends ScheduleOptions, JobHandlerOptions {
  /** The schedule's unique name (its row in background_schedules). Default `Class.method`: name it to rename the class freely. */
  name?: string;
  /** The queue the fired jobs go to, which the method handles. Default: the schedule's name. */
  queue?: string;
}

/** QueueService.upsertSchedule: a schedule created or changed at runtime, firing into any queue. */
export interface ScheduleSpec extends ScheduleOptions {
  name: string;
  cron: string;
  queue: string;
  /** Attempts of each fired job. Default: the queue's, as at enqueue. */
  maxAttempts?: number;
}

/** `job.payload._schedule` of a fired job: which schedule and which fire time (ISO 8601, UTC) it is. */
export interface ScheduleFire {
  name: string;
  fireAt: string;
}

/** The payload a recurring job's handler receives. */
export type RecurringJobPayload<TPayload extends object = Record<string, unknown>> = TPayload & { _schedule: ScheduleFire };

/** A row of background_schedules, as QueueService.schedules() and schedule() return it. */
export interface ScheduleInfo {
  name: string;
  queue: string;
  cron: string;
  timeZone: string;
  payload: Record<string, unknown>;
  missedFires: MissedFires;
  priority: number;
  maxAttempts: number | null;
  paused: boolean;
  /** The next fire time the schedule will enqueue (or, under its policy, skip). */
  nextFireAt: Date;
  /** The latest fire time a job was enqueued for; null before the first. */
  lastFireAt: Date | null;
  /** 'code': declared with @RecurringJob (synced at boot); 'runtime': made with upsertSchedule. */
  source: 'code' | 'runtime';
  /** A code schedule that no running instance declares any more (removed from code): it does not fire. */
  orphaned: boolean;
  createdAt: Date;
  updatedAt: Date;
}
