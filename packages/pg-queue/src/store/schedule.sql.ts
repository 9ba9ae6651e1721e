// Every SQL statement on background_schedules (recurring jobs). Fire times are computed in Node by the cron
// library, but "is it due" is always decided by the database clock (now()).

const MS = `* interval '1 millisecond'`;

/** A code schedule that no running instance has declared for this long no longer fires ($n = orphanAfterMs). */
const LIVE = (orphanAfterMs: string) => `(source = 'runtime' OR declared_at > now() - ${orphanAfterMs}::int8 ${MS})`;

const COLUMNS = `name, queue_name, cron, time_zone, payload, missed_fires, missed_window_ms, priority, max_attempts, paused,
  next_fire_at, last_fire_at, source, revision, declared_at, created_at, updated_at`;

export const SCHEDULE_SQL = {
  dbNow: `SELECT (extract(epoch FROM now()) * 1000)::float8 AS now_ms`,

  // The tick: a page of due live schedules (through the partial index on next_fire_at) after the keyset
  // ($3 next_fire_at as the previous page's last row had it, exactly, as text; $4 its name), then one row
  // (name NULL) with the database clock and the ms until the next live fire after them, for the timer.
  dueSchedules: `
    WITH due AS (
      SELECT name, queue_name, cron, time_zone, payload, missed_fires, missed_window_ms, priority, max_attempts, revision,
        (extract(epoch FROM date_trunc('milliseconds', next_fire_at)) * 1000)::float8 AS next_fire_ms,
        next_fire_at::text AS next_fire_key
      FROM background_schedules
      WHERE NOT paused AND next_fire_at <= now() AND ${LIVE('$1')}
        AND ($3::timestamptz IS NULL OR (next_fire_at >= $3::timestamptz AND (next_fire_at, name) > ($3::timestamptz, $4::text)))
      ORDER BY next_fire_at, name
      LIMIT $2
    )
    SELECT *, NULL::float8 AS now_ms, NULL::float8 AS next_in_ms FROM due
    UNION ALL
    SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
      (extract(epoch FROM now()) * 1000)::float8,
      (SELECT extract(epoch FROM min(next_fire_at) - now()) * 1000 FROM background_schedules
       WHERE NOT paused AND next_fire_at > now() AND ${LIVE('$1')})::float8`,

  // The compare-and-set that claims a fire: only the instance that still sees the row at the fire time and
  // definition it planned from moves it on; SKIP LOCKED makes the others give up at once instead of waiting
  // for the winner's transaction. Runs in the transaction that inserts the fire's jobs. The fire time is
  // compared at the precision it was read (milliseconds): one written by SQL (now() + interval) has
  // microseconds, and an exact comparison lost to nobody on every tick.
  claimFire: `
    UPDATE background_schedules AS s
    SET next_fire_at = $4, last_fire_at = coalesce($5, s.last_fire_at)
    WHERE s.name = (SELECT name FROM background_schedules
                    WHERE name = $1 AND date_trunc('milliseconds', next_fire_at) = $2 AND revision = $3 AND NOT paused
                    FOR UPDATE SKIP LOCKED)
    RETURNING s.name`,

  // Boot sync of the schedules declared in code: one statement per instance, rows in name order (concurrent
  // instances lock them in the same order: no deadlock). An unchanged schedule keeps its next_fire_at and
  // revision; a changed cron or time zone takes the next fire the instance computed; any change bumps the
  // revision. A runtime schedule of the same name becomes a code one. Paused stays as it was.
  syncCodeSchedules: `
    INSERT INTO background_schedules AS s (name, queue_name, cron, time_zone, payload, missed_fires, missed_window_ms,
      priority, max_attempts, next_fire_at, source, declared_at)
    SELECT d.name, d.queue_name, d.cron, d.time_zone, d.payload, d.missed_fires, d.missed_window_ms, d.priority, d.max_attempts,
      d.next_fire_at, 'code', now()
    FROM jsonb_to_recordset($1::jsonb) AS d(name text, queue_name text, cron text, time_zone text, payload jsonb,
      missed_fires text, missed_window_ms int8, priority int, max_attempts int, next_fire_at timestamptz)
    ORDER BY d.name
    ON CONFLICT (name) DO UPDATE SET
      declared_at = now(),
      source = 'code',
      queue_name = excluded.queue_name, cron = excluded.cron, time_zone = excluded.time_zone, payload = excluded.payload,
      missed_fires = excluded.missed_fires, missed_window_ms = excluded.missed_window_ms, priority = excluded.priority,
      max_attempts = excluded.max_attempts,
      next_fire_at = CASE WHEN (s.cron, s.time_zone) IS DISTINCT FROM (excluded.cron, excluded.time_zone)
                          THEN excluded.next_fire_at ELSE s.next_fire_at END,
      revision = s.revision + CASE WHEN (s.queue_name, s.cron, s.time_zone, s.payload, s.missed_fires, s.missed_window_ms,
                                         s.priority, s.max_attempts, s.source)
                                        IS DISTINCT FROM (excluded.queue_name, excluded.cron, excluded.time_zone, excluded.payload,
                                         excluded.missed_fires, excluded.missed_window_ms, excluded.priority, excluded.max_attempts, 'code')
                                   THEN 1 ELSE 0 END,
      updated_at = CASE WHEN (s.queue_name, s.cron, s.time_zone, s.payload, s.missed_fires, s.missed_window_ms,
                              s.priority, s.max_attempts, s.source)
                             IS DISTINCT FROM (excluded.queue_name, excluded.cron, excluded.time_zone, excluded.payload,
                              excluded.missed_fires, excluded.missed_window_ms, excluded.priority, excluded.max_attempts, 'code')
                        THEN now() ELSE s.updated_at END
    RETURNING name, (xmax = 0) AS inserted`,

  // Every minute, each instance says which code schedules it still declares.
  touchDeclared: `UPDATE background_schedules SET declared_at = now() WHERE name = ANY($1::text[]) AND source = 'code'`,

  // A runtime create or update. Same rules as the sync for next_fire_at and revision.
  upsertSchedule: `
    INSERT INTO background_schedules AS s (name, queue_name, cron, time_zone, payload, missed_fires, missed_window_ms,
      priority, max_attempts, next_fire_at, source)
    VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8, $9, $10, 'runtime')
    ON CONFLICT (name) DO UPDATE SET
      queue_name = excluded.queue_name, cron = excluded.cron, time_zone = excluded.time_zone, payload = excluded.payload,
      missed_fires = excluded.missed_fires, missed_window_ms = excluded.missed_window_ms, priority = excluded.priority,
      max_attempts = excluded.max_attempts, source = 'runtime', declared_at = NULL,
      next_fire_at = CASE WHEN (s.cron, s.time_zone) IS DISTINCT FROM (excluded.cron, excluded.time_zone)
                          THEN excluded.next_fire_at ELSE s.next_fire_at END,
      revision = s.revision + 1, updated_at = now()
    RETURNING ${COLUMNS}`,

  deleteSchedule: `DELETE FROM background_schedules WHERE name = $1 RETURNING name`,

  pauseSchedule: `UPDATE background_schedules SET paused = true, revision = revision + 1, updated_at = now() WHERE name = $1 RETURNING name`,

  // Resuming starts from the next fire after now ($2, computed from the database clock): the fires of the
  // pause were meant not to run, whatever the missed-fire policy. Only if the definition did not change meanwhile.
  resumeSchedule: `
    UPDATE background_schedules SET paused = false, next_fire_at = $2, revision = revision + 1, updated_at = now()
    WHERE name = $1 AND revision = $3 RETURNING name`,

  getSchedule: `SELECT ${COLUMNS}, NOT ${LIVE('$2')} AS orphaned FROM background_schedules WHERE name = $1`,

  listSchedules: `SELECT ${COLUMNS}, NOT ${LIVE('$1')} AS orphaned FROM background_schedules ORDER BY name`,
} as const;
