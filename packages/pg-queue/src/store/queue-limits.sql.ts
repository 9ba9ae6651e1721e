// Limits changed at runtime and a partner's 429 (issue 42, part 2): the statements on background_queues' limits and
// blocks and on background_queue_key_blocks (migration RuntimeLimits1764680000000).
import { LIMITS_CHANNEL, MS, REVIEW_CHANNEL } from './shared.sql.js';

/** ms from now() until a timestamptz column, 0 when it has passed or is NULL. */
const MS_LEFT = (column: string) => `coalesce(greatest(0, date_part('epoch', ${column} - now()) * 1000), 0)::float8`;

export const QUEUE_LIMITS_SQL = {
  // The operator's change ($1 queue, $2 the overrides to set as a JSON object, a key's JSON null meaning "none", $3 the
  // keys to clear back to the decorator's value): merged into the stored object, which goes back to NULL when empty.
  // Every process serving the queue is told (LIMITS_CHANNEL) and reads the row again; the row is the only truth.
  setQueueLimits: `
    WITH changed AS (
      INSERT INTO background_queues AS q (queue_name, limits) VALUES ($1, nullif($2::jsonb - $3::text[], '{}'))
      ON CONFLICT (queue_name) DO UPDATE SET limits = nullif((coalesce(q.limits, '{}') - $3::text[]) || $2::jsonb, '{}'), updated_at = now()
      RETURNING queue_name, limits
    )
    SELECT limits, (SELECT count(pg_notify('${LIMITS_CHANNEL}', queue_name)) FROM changed) AS notified FROM changed`,

  // What a process serving queues $1 reads (on a notice, and every QUEUE_LIMITS_REREAD_MS as a fallback): the overrides
  // (and their text, the copy its claims send back for the row to compare: queueStopped in claim-parts.sql.ts),
  // the ms left of the queue's block and of its keys' blocks, whether an adaptive backoff waits for a success, and
  // whether the queue has had LIFO jobs (its claims then take them first: ClaimOrder in claim.sql.ts).
  queueSettings: `
    SELECT queue_name, limits, limits::text AS limits_text, ${MS_LEFT('blocked_until')} AS blocked_ms, ${MS_LEFT('key_blocked_until')} AS key_blocked_ms,
      coalesce(lifo_jobs, false) AS lifo_jobs,
      rate_backoff_ms IS NOT NULL OR (key_blocked_until IS NOT NULL AND EXISTS (
        SELECT 1 FROM background_queue_key_blocks AS b WHERE b.queue_name = q.queue_name AND b.backoff_ms IS NOT NULL)) AS backoff
    FROM background_queues AS q WHERE queue_name = ANY($1::text[])`,

  // A partner's 429 for the whole queue ($1, $2 ms the handler asked, $3 the backoff's maxMs): no job of it starts
  // until blocked_until. A 429 while a block is in force came from a job started before it: it does not grow the
  // block. One after the block lapsed with no success between (rate_backoff_ms still set) doubles the last length,
  // up to $3 (never below what the partner asked). Workers holding jobs of the queue in their buffers are told to
  // check them (REVIEW_CHANNEL, as for a pause: the heartbeat gives back buffered jobs of a blocked queue), and
  // every process reads the row again (LIMITS_CHANNEL).
  blockQueue: `
    WITH cur AS (
      SELECT blocked_until, rate_backoff_ms FROM background_queues WHERE queue_name = $1 FOR UPDATE
    ), next AS (
      SELECT CASE WHEN c.blocked_until > now() THEN coalesce(c.rate_backoff_ms, $2::int)
                  WHEN c.rate_backoff_ms IS NULL THEN $2::int
                  ELSE greatest($2::int, least($3::int, c.rate_backoff_ms * 2)) END AS ms
      FROM (SELECT 1) AS one LEFT JOIN cur AS c ON true
    ), blocked AS (
      INSERT INTO background_queues AS q (queue_name, blocked_until, rate_backoff_ms)
      SELECT $1, now() + n.ms ${MS}, n.ms FROM next AS n
      ON CONFLICT (queue_name) DO UPDATE
      SET blocked_until = greatest(q.blocked_until, excluded.blocked_until), rate_backoff_ms = excluded.rate_backoff_ms, updated_at = now()
      RETURNING queue_name, blocked_until
    )
    SELECT ${MS_LEFT('blocked_until')} AS blocked_ms,
      (SELECT count(pg_notify('${REVIEW_CHANNEL}', queue_name)) + count(pg_notify('${LIMITS_CHANNEL}', queue_name)) FROM blocked) AS notified
    FROM blocked`,

  // The same for one concurrency key ($4): its row in background_queue_key_blocks, and the queue's key_blocked_until
  // (the latest end of its keys' blocks), which the plain claim's single-row probe reads.
  blockKey: `
    WITH cur AS (
      SELECT blocked_until, backoff_ms FROM background_queue_key_blocks WHERE queue_name = $1 AND concurrency_key = $4 FOR UPDATE
    ), next AS (
      SELECT CASE WHEN c.blocked_until > now() THEN coalesce(c.backoff_ms, $2::int)
                  WHEN c.backoff_ms IS NULL THEN $2::int
                  ELSE greatest($2::int, least($3::int, c.backoff_ms * 2)) END AS ms
      FROM (SELECT 1) AS one LEFT JOIN cur AS c ON true
    ), blocked AS (
      INSERT INTO background_queue_key_blocks AS b (queue_name, concurrency_key, blocked_until, backoff_ms)
      SELECT $1, $4, now() + n.ms ${MS}, n.ms FROM next AS n
      ON CONFLICT (queue_name, concurrency_key) DO UPDATE
      SET blocked_until = greatest(b.blocked_until, excluded.blocked_until), backoff_ms = excluded.backoff_ms
      RETURNING queue_name, blocked_until
    ), queue AS (
      INSERT INTO background_queues AS q (queue_name, key_blocked_until) SELECT queue_name, blocked_until FROM blocked
      ON CONFLICT (queue_name) DO UPDATE
      SET key_blocked_until = greatest(q.key_blocked_until, excluded.key_blocked_until), updated_at = now()
      RETURNING queue_name
    )
    SELECT ${MS_LEFT('blocked_until')} AS blocked_ms,
      (SELECT count(pg_notify('${REVIEW_CHANNEL}', queue_name)) + count(pg_notify('${LIMITS_CHANNEL}', queue_name)) FROM queue) AS notified
    FROM blocked`,

  // A job of queue $1 completed while a backoff waited for a success: the queue's backoff and its lapsed keys'
  // backoffs start again from what the next 429 asks; lapsed key blocks are deleted (nothing reads them any more).
  resetBackoff: `
    WITH queue AS (
      UPDATE background_queues SET rate_backoff_ms = NULL
      WHERE queue_name = $1 AND rate_backoff_ms IS NOT NULL AND NOT coalesce(blocked_until > now(), false)
      RETURNING queue_name
    ), keys AS (
      DELETE FROM background_queue_key_blocks WHERE queue_name = $1 AND blocked_until <= now() RETURNING concurrency_key
    )
    SELECT (SELECT count(*) FROM queue)::int + (SELECT count(*) FROM keys)::int AS reset`,

  // A worker switched its queue from the plain claim to a limited one (its limits changed at runtime): the jobs it
  // runs or holds started ($2 ids) count against the limits from now on, as a limited claim's would.
  markLimited: `
    UPDATE background_jobs SET limited = true
    WHERE id = ANY($2::int8[]) AND status = 'processing' AND locked_by = $1 AND NOT buffered AND limited IS NOT TRUE`,
} as const;
