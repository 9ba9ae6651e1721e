import type { JobHandlerOptions } from './job-handler-options.interface.js';

/**
 * What a cron schedule does with fire times that passed while no instance was ticking (downtime). A fire is on
 * time while it is the latest due fire and at most one minute late; any other due fire was missed.
 * - 'skip' (default, as cron does): missed fires are dropped; the schedule goes on from the next fire.
 * - 'latest': one job, for the latest due fire (so a downtime costs at most one run, never zero).
 * - { windowMs }: a job for every missed fire at most windowMs old (at most 1,000 per catch-up, the latest).
 * An `every` schedule has no missed fires: its next fire is measured from its last one, so after a downtime it fires
 * once, as soon as an instance is back.
 */
export type MissedFires = 'skip' | 'latest' | { windowMs: number };

/**
 * A schedule's definition apart from when it fires (cron or every): QueueService.upsertSchedule and @RecurringJob.
 */
export interface ScheduleOptions {
  /**
   * IANA time zone the cron expression is read in (DST as cron-parser does it: see README), and the day of
   * `{{fireDate}}`. Default 'UTC'.
   */
  timeZone?: string;
  /**
   * The payload template: a JSON object; each fired job's payload is this object, with the placeholders
   * `{{fireAt}}` (the fire time, ISO 8601 UTC), `{{fireDate}}` (its day in `timeZone`, YYYY-MM-DD) and `{{name}}`
   * (the schedule's) replaced in its string values, plus `_schedule: { name, fireAt }`. Default {}.
   */
  payload?: Record<string, unknown>;
  /** Cron schedules only. Default 'skip'. */
  missedFires?: MissedFires;
  /** Priority of each fired job. Default 0. */
  priority?: number;
  /**
   * Fires at most this many times (a positive integer), counted across every instance; then it stops firing
   * (`ended: 'limit'` in ScheduleInfo). fireSchedule's fires are not counted. Default: no limit.
   */
  limit?: number;
  /**
   * No fire before this instant (a Date, or an ISO 8601 string). A cron schedule's first fire is its first fire
   * time at or after it; an `every` schedule fires first at it, then every interval. Default: none.
   */
  startDate?: Date | string;
  /** No fire after this instant (a Date, or an ISO 8601 string); after it the schedule ends (`ended: 'endDate'`). Must be after startDate. Default: none. */
  endDate?: Date | string;
}

/**
 * `@RecurringJob(cron, options)` or `@RecurringJob({ every, ... })`: a schedule, plus the options of the handler
 * the method becomes.
 */
export interface RecurringJobOptions extends ScheduleOptions, JobHandlerOptions {
  /** The schedule's unique name (its row in background_schedules). Default `Class.method`: name it to rename the class freely. */
  name?: string;
  /** The queue the fired jobs go to, which the method handles. Default: the schedule's name. */
  queue?: string;
  /** The cron expression, when the decorator is given options alone (`@RecurringJob({ cron: '0 3 * * *' })`). */
  cron?: string;
  /**
   * A fixed interval in milliseconds (an integer, at least 1000), measured from the last fire (by the database
   * clock), instead of a cron expression. The first fire is at `startDate`, or one interval after the schedule is
   * first stored.
   */
  every?: number;
}

/** QueueService.upsertSchedule: a schedule created or changed at runtime, firing into any queue; `cron` or `every`. */
export type ScheduleSpec = ScheduleSpecBase & ({ cron: string; every?: undefined } | { every: number; cron?: undefined });

/** What a ScheduleSpec holds besides `cron` or `every`. */
export interface ScheduleSpecBase extends ScheduleOptions {
  name: string;
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
  /** The cron expression; null for an `every` schedule. */
  cron: string | null;
  /** The interval in ms of an `every` schedule; null for a cron one. */
  every: number | null;
  timeZone: string;
  /** The payload template, as stored (placeholders not replaced). */
  payload: Record<string, unknown>;
  missedFires: MissedFires;
  priority: number;
  maxAttempts: number | null;
  /** The most fires, or null (no limit). */
  limit: number | null;
  /** Fires enqueued by the schedule's ticks so far (the ones its limit counts; fireSchedule's are not). */
  fires: number;
  /** limit - fires, or null without a limit. */
  firesLeft: number | null;
  startDate: Date | null;
  endDate: Date | null;
  paused: boolean;
  /**
   * The next fire time the schedule will enqueue (or, under its policy, skip); for an `every` schedule the earliest
   * (the fire happens when an instance claims it, and the next one is measured from then). Null once it ended.
   */
  nextFireAt: Date | null;
  /** The latest fire time a job was enqueued for; null before the first. */
  lastFireAt: Date | null;
  /** Why the schedule fires no more: its limit was reached, or its endDate passed; null while it goes on. */
  ended: 'limit' | 'endDate' | null;
  /** 'code': declared with @RecurringJob (synced at boot); 'runtime': made with upsertSchedule. */
  source: 'code' | 'runtime';
  /** A code schedule that no running instance declares any more (removed from code): it does not fire. */
  orphaned: boolean;
  createdAt: Date;
  updatedAt: Date;
}
