// Every SQL statement on background_schedules (recurring jobs). A cron schedule's fire times are computed in Node
// by the cron library; an `every` schedule's by its claim, from the database clock; "is it due" is always decided by
// the database clock (now()). next_fire_at NULL: the schedule has ended (its limit reached, or its end_at passed).

const MS = `* interval '1 millisecond'`;

/** A code schedule that no running instance has declared for this long no longer fires ($n = orphanAfterMs). */
const LIVE = (orphanAfterMs: string) => `(source = 'runtime' OR declared_at > now() - ${orphanAfterMs}::int8 ${MS})`;

const COLUMNS = `name, queue_name, cron, every_ms, time_zone, payload, missed_fires, missed_window_ms, priority, max_attempts,
  fire_limit, fires, start_at, end_at, paused, next_fire_at, last_fire_at, source, revision, declared_at, created_at, updated_at`;

/** Epoch ms of a timestamptz, as float8 (NULL stays NULL). */
const EPOCH_MS = (column: string) => `(extract(epoch FROM ${column}) * 1000)::float8`;

/**
 * A changed definition: the columns that decide when it fires (s the stored row, excluded the new one). A change
 * of these starts the schedule again from its first fire after now; a change of end_at or fire_limit alone keeps
 * the next fire when it is still within them.
 */
const TIMING_CHANGED = `(s.cron, s.every_ms, s.time_zone, s.start_at) IS DISTINCT FROM (excluded.cron, excluded.every_ms, excluded.time_zone, excluded.start_at)`;

/**
 * The next fire an upsert or a boot sync leaves on the row: none once the row's fires reached the new limit; the
 * first fire Node computed (after now, within start and end: excluded.next_fire_at) when the timing changed or the
 * schedule had ended (a raised limit or a later end brings it back); else the stored one, unless past the new end.
 */
const NEXT_AFTER_CHANGE = `CASE WHEN excluded.fire_limit IS NOT NULL AND s.fires >= excluded.fire_limit THEN NULL
    WHEN ${TIMING_CHANGED} OR s.next_fire_at IS NULL THEN excluded.next_fire_at
    WHEN excluded.end_at IS NOT NULL AND s.next_fire_at > excluded.end_at THEN NULL
    ELSE s.next_fire_at END`;

/** The definition's columns, stored against new (a change of any of them bumps the revision). */
const DEFINITION = (row: string) =>
  `(${row}.queue_name, ${row}.cron, ${row}.every_ms, ${row}.time_zone, ${row}.payload, ${row}.missed_fires, ${row}.missed_window_ms, ${row}.priority, ${row}.max_attempts, ${row}.fire_limit, ${row}.start_at, ${row}.end_at)`;

export const SCHEDULE_SQL = {
  dbNow: `SELECT (extract(epoch FROM now()) * 1000)::float8 AS now_ms`,

  // The tick: a page of due live schedules (through the partial index on next_fire_at) after the keyset
  // ($3 next_fire_at as the previous page's last row had it, exactly, as text; $4 its name), each row with the
  // database clock and the ms until the next live fire after them, for the timer; one row of those alone (name
  // NULL) when nothing is due. An ended schedule (next_fire_at NULL) is never due.
  dueSchedules: `
    WITH due AS (
      SELECT name, queue_name, cron, every_ms, time_zone, payload, missed_fires, missed_window_ms, priority, max_attempts, revision,
        fire_limit, fires, ${EPOCH_MS('start_at')} AS start_ms, ${EPOCH_MS('end_at')} AS end_ms,
        (extract(epoch FROM date_trunc('milliseconds', next_fire_at)) * 1000)::float8 AS next_fire_ms,
        next_fire_at::text AS next_fire_key, next_fire_at
      FROM background_schedules
      WHERE NOT paused AND next_fire_at <= now() AND ${LIVE('$1')}
        AND ($3::timestamptz IS NULL OR (next_fire_at >= $3::timestamptz AND (next_fire_at, name) > ($3::timestamptz, $4::text)))
      ORDER BY next_fire_at, name
      LIMIT $2
    ), clock AS (
      SELECT (extract(epoch FROM now()) * 1000)::float8 AS now_ms,
        (SELECT extract(epoch FROM min(next_fire_at) - now()) * 1000 FROM background_schedules
         WHERE NOT paused AND next_fire_at > now() AND ${LIVE('$1')})::float8 AS next_in_ms
    )
    SELECT due.*, clock.now_ms, clock.next_in_ms FROM clock LEFT JOIN due ON true ORDER BY due.next_fire_at, due.name`,

  // The compare-and-set that claims a fire of a cron schedule: only the instance that still sees the row at the
  // fire time, count of fires and definition it planned from moves it on; SKIP LOCKED makes the others give up at
  // once instead of waiting for the winner's transaction. Runs in the transaction that inserts the fire's jobs
  // ($6 of them, counted in fires). $4 NULL ends the schedule (its limit reached, or its next fire past end_at). The
  // fire time is compared at the precision it was read (milliseconds): one written by SQL (now() + interval) has
  // microseconds, and an exact comparison lost to nobody on every tick.
  claimFire: `
    UPDATE background_schedules AS s
    SET next_fire_at = $4, last_fire_at = coalesce($5, s.last_fire_at), fires = s.fires + $6
    WHERE s.name = (SELECT name FROM background_schedules
                    WHERE name = $1 AND date_trunc('milliseconds', next_fire_at) = $2 AND revision = $3 AND fires = $7 AND NOT paused
                    FOR UPDATE SKIP LOCKED)
    RETURNING s.name`,

  // The same compare-and-set for an `every` schedule, which also makes the fire time: the database clock of the
  // claim (to the millisecond), so two fires are never closer than every_ms by that clock, whichever instance made
  // them and however late; the next fire is every_ms after it. The row must be due by the claim's own clock too. Past
  // end_at (a downtime over the end) it ends the schedule without a fire; the fire that reaches the limit, or whose
  // next would be past end_at, ends it too. Returns whether it fired, the fire time and the next fire (NULL: ended);
  // no row when another instance claimed first or the schedule changed since the scan.
  claimEveryFire: `
    WITH c AS (
      SELECT name, every_ms, fire_limit, fires, end_at, date_trunc('milliseconds', now()) AS at
      FROM background_schedules
      WHERE name = $1 AND date_trunc('milliseconds', next_fire_at) = $2 AND revision = $3 AND NOT paused
        AND every_ms IS NOT NULL AND date_trunc('milliseconds', next_fire_at) <= now()
      FOR UPDATE SKIP LOCKED
    ), f AS (
      SELECT c.*, (c.end_at IS NULL OR c.at <= c.end_at) AS fire FROM c
    )
    UPDATE background_schedules AS s
    SET next_fire_at = CASE WHEN f.fire AND (f.fire_limit IS NULL OR f.fires + 1 < f.fire_limit)
                              AND (f.end_at IS NULL OR f.at + f.every_ms ${MS} <= f.end_at)
                            THEN f.at + f.every_ms ${MS} END,
      last_fire_at = CASE WHEN f.fire THEN f.at ELSE s.last_fire_at END,
      fires = s.fires + f.fire::int
    FROM f WHERE s.name = f.name
    RETURNING f.fire, ${EPOCH_MS('f.at')} AS fire_ms, ${EPOCH_MS('s.next_fire_at')} AS next_fire_ms, s.fires, s.fire_limit`,

  // Boot sync of the schedules declared in code: one statement per instance, rows in name order (concurrent
  // instances lock them in the same order: no deadlock). An unchanged schedule keeps its next_fire_at and
  // revision; a changed cron, interval, time zone or start takes the first fire the instance computed
  // (NEXT_AFTER_CHANGE); any change bumps the revision. The count of fires stays. A runtime schedule of the same
  // name becomes a code one. Paused stays as it was.
  syncCodeSchedules: `
    INSERT INTO background_schedules AS s (name, queue_name, cron, every_ms, time_zone, payload, missed_fires, missed_window_ms,
      priority, max_attempts, fire_limit, start_at, end_at, next_fire_at, source, declared_at)
    SELECT d.name, d.queue_name, d.cron, d.every_ms, d.time_zone, d.payload, d.missed_fires, d.missed_window_ms, d.priority, d.max_attempts,
      d.fire_limit, d.start_at, d.end_at, d.next_fire_at, 'code', now()
    FROM jsonb_to_recordset($1::jsonb) AS d(name text, queue_name text, cron text, every_ms int8, time_zone text, payload jsonb,
      missed_fires text, missed_window_ms int8, priority int, max_attempts int, fire_limit int8, start_at timestamptz,
      end_at timestamptz, next_fire_at timestamptz)
    ORDER BY d.name
    ON CONFLICT (name) DO UPDATE SET
      declared_at = now(),
      source = 'code',
      queue_name = excluded.queue_name, cron = excluded.cron, every_ms = excluded.every_ms, time_zone = excluded.time_zone,
      payload = excluded.payload, missed_fires = excluded.missed_fires, missed_window_ms = excluded.missed_window_ms,
      priority = excluded.priority, max_attempts = excluded.max_attempts, fire_limit = excluded.fire_limit,
      start_at = excluded.start_at, end_at = excluded.end_at,
      next_fire_at = ${NEXT_AFTER_CHANGE},
      revision = s.revision + CASE WHEN (${DEFINITION('s')}, s.source) IS DISTINCT FROM (${DEFINITION('excluded')}, 'code') THEN 1 ELSE 0 END,
      updated_at = CASE WHEN (${DEFINITION('s')}, s.source) IS DISTINCT FROM (${DEFINITION('excluded')}, 'code') THEN now() ELSE s.updated_at END
    RETURNING name, (xmax = 0) AS inserted`,

  // Every minute, each instance says which code schedules it still declares.
  touchDeclared: `UPDATE background_schedules SET declared_at = now() WHERE name = ANY($1::text[]) AND source = 'code'`,

  // A runtime create or update. Same rules as the sync for next_fire_at and the count of fires; the revision is bumped.
  upsertSchedule: `
    INSERT INTO background_schedules AS s (name, queue_name, cron, every_ms, time_zone, payload, missed_fires, missed_window_ms,
      priority, max_attempts, fire_limit, start_at, end_at, next_fire_at, source)
    VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9, $10, $11, $12, $13, $14, 'runtime')
    ON CONFLICT (name) DO UPDATE SET
      queue_name = excluded.queue_name, cron = excluded.cron, every_ms = excluded.every_ms, time_zone = excluded.time_zone,
      payload = excluded.payload, missed_fires = excluded.missed_fires, missed_window_ms = excluded.missed_window_ms,
      priority = excluded.priority, max_attempts = excluded.max_attempts, fire_limit = excluded.fire_limit,
      start_at = excluded.start_at, end_at = excluded.end_at, source = 'runtime', declared_at = NULL,
      next_fire_at = ${NEXT_AFTER_CHANGE},
      revision = s.revision + 1, updated_at = now()
    RETURNING ${COLUMNS}`,

  deleteSchedule: `DELETE FROM background_schedules WHERE name = $1 RETURNING name`,

  pauseSchedule: `UPDATE background_schedules SET paused = true, revision = revision + 1, updated_at = now() WHERE name = $1 RETURNING name`,

  // Resuming starts from the next fire after now ($2, computed from the database clock; NULL: the schedule has
  // ended): the fires of the pause were meant not to run, whatever the missed-fire policy. Only if the definition
  // (and the count of fires: $4) did not change meanwhile.
  resumeSchedule: `
    UPDATE background_schedules SET paused = false, next_fire_at = $2, revision = revision + 1, updated_at = now()
    WHERE name = $1 AND revision = $3 AND fires = $4 RETURNING name`,

  getSchedule: `SELECT ${COLUMNS}, NOT ${LIVE('$2')} AS orphaned FROM background_schedules WHERE name = $1`,

  listSchedules: `SELECT ${COLUMNS}, NOT ${LIVE('$1')} AS orphaned FROM background_schedules ORDER BY name`,
} as const;
