import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Enqueue from SQL (docs/guides/sql-enqueue.md): functions that let triggers, SQL scripts and services in other
 * languages add jobs under the queue's rules, as QueueService does:
 * - `pg_queue_enqueue(queue, payload, ...options)` adds one job and returns its id (the holder's, for a duplicate);
 * - `pg_queue_enqueue_unique(...)`, the same with a required unique_key, returns (id, duplicate, replaced);
 * - `pg_queue_enqueue_many(jobs jsonb)` adds a JSON array of jobs and returns (id, duplicate, replaced) per job, in order.
 * Each checks its input as the Node side does (a refused job raises an error naming the option, SQLSTATE 22023, and
 * nothing is stored), then runs the library's statements: a batch without keys one plain insert, a batch with keys
 * the keyed insert of enqueue-keyed.sql.ts in its three phases, each in (queue, key) order, so calls naming the same keys in any
 * orders (and the library's own calls) wait for each other and never deadlock. Phases 1 and 2 run again for rows
 * whose holder committed after the statement's snapshot (a VOLATILE function's statements each take a fresh one),
 * and phase 3 runs once after them, as a statement of its own (see the function). Jobs of one key in one call are
 * folded as enqueueMany folds them (unique-rows.ts). Wake-ups are the raw INSERT's: the table's trigger NOTIFYs at
 * commit, and a replaced job's queue is notified by the statement, as the library's keyed insert does in a caller's
 * transaction.
 *
 * Frozen once released, like every migration: the functions' text lives here (a later change is a new migration
 * with CREATE OR REPLACE). The channel names are written out for that reason (pg_queue_jobs, pg_queue_review: see
 * JOBS_CHANNEL and REVIEW_CHANNEL). The functions are created in the schema of background_jobs and run with that
 * schema as their search_path, so a caller whose search_path does not name it (a trigger of another schema's
 * table) still reaches the queue's tables. New functions only: no lock on any table.
 */
export class SqlEnqueue1764640000000 implements MigrationInterface {
  name = 'SqlEnqueue1764640000000';

  async up(q: QueryRunner): Promise<void> {
    const schema = await jobsSchema(q);
    for (const statement of functions(schema)) await q.query(statement);
  }

  async down(q: QueryRunner): Promise<void> {
    const schema = await jobsSchema(q);
    await q.query(`DROP FUNCTION IF EXISTS ${schema}.pg_queue_enqueue_many(jsonb)`);
    await q.query(`DROP FUNCTION IF EXISTS ${schema}.pg_queue_enqueue_unique(${SCALAR_ARGUMENT_TYPES})`);
    await q.query(`DROP FUNCTION IF EXISTS ${schema}.pg_queue_enqueue(${SCALAR_ARGUMENT_TYPES})`);
    await q.query(`DROP FUNCTION IF EXISTS ${schema}.pg_queue_enqueue_jobs(jsonb, text)`);
    await q.query(`DROP FUNCTION IF EXISTS ${schema}.pg_queue_enqueue_problem(jsonb, text)`);
  }
}

/** The schema background_jobs lives in (the one the earlier migrations' unqualified names reached), quoted. */
async function jobsSchema(q: QueryRunner): Promise<string> {
  const [{ schema }] = (await q.query(
    `SELECT quote_ident(n.nspname) AS schema FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace WHERE c.oid = 'background_jobs'::regclass`,
  )) as { schema: string }[];
  return schema;
}

const SCALAR_ARGUMENT_TYPES = 'text, jsonb, timestamptz, bigint, integer, integer, text, text, bigint, text, jsonb';

/** The arguments of pg_queue_enqueue and pg_queue_enqueue_unique: QueueService.enqueue's options, by name, with their defaults. */
const SCALAR_ARGUMENTS = `
    queue text,
    payload jsonb DEFAULT '{}',
    run_at timestamptz DEFAULT NULL,
    delay_ms bigint DEFAULT NULL,
    priority integer DEFAULT NULL,
    max_attempts integer DEFAULT NULL,
    unique_key text DEFAULT NULL,
    on_conflict text DEFAULT NULL,
    unique_for_ms bigint DEFAULT NULL,
    concurrency_key text DEFAULT NULL,
    trace_context jsonb DEFAULT NULL`;

/**
 * A scalar call's job as pg_queue_enqueue_jobs reads it. A NULL option is a JSON null, read as absent; a NULL payload
 * is left out, which the check refuses (a JSON null payload is 'null'::jsonb).
 */
const SCALAR_SPEC = `jsonb_build_array(
      jsonb_build_object('queue', queue, 'run_at', run_at, 'delay_ms', delay_ms, 'priority', priority, 'max_attempts', max_attempts,
                         'unique_key', unique_key, 'on_conflict', on_conflict, 'unique_for_ms', unique_for_ms,
                         'concurrency_key', concurrency_key, 'trace_context', trace_context)
      || CASE WHEN payload IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('payload', payload) END)`;

function functions(schema: string): string[] {
  const settings = `SET search_path = ${schema}, pg_temp`;
  return [
    // What is wrong with one job, in the Node side's words (buildJobRow, uniqueFields), or NULL. `caller` names the
    // function in the messages. plpgsql, not a SQL CASE: each test runs only once the ones before it passed (a cast
    // in a later branch of a CASE may be folded, and fail, at planning).
    `
  CREATE OR REPLACE FUNCTION ${schema}.pg_queue_enqueue_problem(spec jsonb, caller text) RETURNS text
  LANGUAGE plpgsql STABLE ${settings} AS $fn$
  DECLARE
    known constant text[] := ARRAY['queue', 'payload', 'run_at', 'delay_ms', 'priority', 'max_attempts', 'unique_key', 'on_conflict',
                                   'unique_for_ms', 'concurrency_key', 'trace_context'];
    stray text;
    queue text;
    at text;
    v jsonb;
    n numeric;
    ra timestamptz;
    has_key boolean;
    mode text;
  BEGIN
    IF jsonb_typeof(spec) IS DISTINCT FROM 'object' THEN
      RETURN format('expected a job as a JSON object {"queue": ..., "payload": ..., ...options}; got %s', coalesce(spec::text, 'NULL'));
    END IF;
    SELECT k INTO stray FROM jsonb_object_keys(spec) AS k WHERE k <> ALL (known) ORDER BY k LIMIT 1;
    IF stray IS NOT NULL THEN
      RETURN format('unknown option %s; known options: %s', to_jsonb(stray), array_to_string(known, ', '));
    END IF;
    IF jsonb_typeof(spec -> 'queue') IS DISTINCT FROM 'string' OR (spec ->> 'queue') !~ '^[A-Za-z0-9_.:-]{1,128}$' THEN
      RETURN format('Invalid queue name %s: use 1 to 128 characters from A-Z a-z 0-9 _ . : -', coalesce(spec -> 'queue', 'null'));
    END IF;
    queue := spec ->> 'queue';
    at := format('%s(%s)', caller, to_jsonb(queue));
    IF NOT spec ? 'payload' THEN
      RETURN format('Cannot enqueue to %s: the payload is missing (NULL); pass a JSON value (''null''::jsonb for a JSON null).', to_jsonb(queue));
    END IF;

    v := nullif(spec -> 'run_at', 'null');
    IF v IS NOT NULL THEN
      -- A JSON date-time with its offset (what to_jsonb(timestamptz) writes): read the same whatever the session's TimeZone.
      IF jsonb_typeof(v) <> 'string'
         OR (v #>> '{}') !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\\.[0-9]+)?)?([Zz]|[+-][0-9]{2}(:?[0-9]{2}(:?[0-9]{2})?)?)$' THEN
        RETURN format('Invalid %s option run_at=%s: expected a date-time from year 1 to 9999 (in JSON: ISO 8601 with its UTC offset, e.g. "2026-12-01T08:00:00Z").', at, v);
      END IF;
      ra := (v #>> '{}')::timestamptz;
      IF ra < '0001-01-01 00:00:00+00' OR ra > '9999-12-31 23:59:59.999+00' THEN
        RETURN format('Invalid %s option run_at=%s: expected a date-time from year 1 to 9999 (in JSON: ISO 8601 with its UTC offset, e.g. "2026-12-01T08:00:00Z").', at, v);
      END IF;
    END IF;
    v := nullif(spec -> 'delay_ms', 'null');
    IF v IS NOT NULL THEN
      IF jsonb_typeof(v) <> 'number' OR v::text::numeric < 0 OR v::text::numeric <> trunc(v::text::numeric) THEN
        RETURN format('Invalid %s option delay_ms=%s: expected a non-negative integer.', at, v);
      END IF;
      IF v::text::numeric > 31557600000000 THEN
        RETURN format('Invalid %s option delay_ms=%s: expected a non-negative integer of at most 31557600000000 (1,000 years).', at, v);
      END IF;
      -- QueueService lets runAt win; from SQL, where both are easy to pass by mistake, one of them is refused.
      IF ra IS NOT NULL THEN
        RETURN format('Invalid %s option delay_ms=%s: expected no delay_ms with run_at (give one of them).', at, v);
      END IF;
    END IF;
    v := nullif(spec -> 'priority', 'null');
    IF v IS NOT NULL AND (jsonb_typeof(v) <> 'number' OR abs(v::text::numeric) > 2147483647 OR v::text::numeric <> trunc(v::text::numeric)) THEN
      RETURN format('Invalid %s option priority=%s: expected an integer (32-bit).', at, v);
    END IF;
    v := nullif(spec -> 'max_attempts', 'null');
    IF v IS NOT NULL AND (jsonb_typeof(v) <> 'number' OR v::text::numeric NOT BETWEEN 1 AND 1000 OR v::text::numeric <> trunc(v::text::numeric)) THEN
      RETURN format('Invalid %s option max_attempts=%s: expected an integer from 1 to 1000.', at, v);
    END IF;
    v := nullif(spec -> 'concurrency_key', 'null');
    IF v IS NOT NULL AND (jsonb_typeof(v) <> 'string' OR length(v #>> '{}') NOT BETWEEN 1 AND 512) THEN
      RETURN format('Invalid %s option concurrency_key=%s: expected a non-empty string of at most 512 characters.', at, v);
    END IF;
    v := nullif(spec -> 'trace_context', 'null');
    IF v IS NOT NULL AND jsonb_typeof(v) <> 'object' THEN
      RETURN format('Invalid %s option trace_context=%s: expected a JSON object {"traceparent": "00-...", "tracestate"?: "..."}.', at, v);
    END IF;

    has_key := nullif(spec -> 'unique_key', 'null') IS NOT NULL;
    IF NOT has_key THEN
      IF nullif(spec -> 'on_conflict', 'null') IS NOT NULL THEN
        RETURN format('Invalid %s option on_conflict=%s: expected no on_conflict without a unique_key.', at, spec -> 'on_conflict');
      END IF;
      IF nullif(spec -> 'unique_for_ms', 'null') IS NOT NULL THEN
        RETURN format('Invalid %s option unique_for_ms=%s: expected no unique_for_ms without a unique_key.', at, spec -> 'unique_for_ms');
      END IF;
      IF caller = 'pg_queue_enqueue_unique' THEN
        RETURN format('%s needs a unique_key; use pg_queue_enqueue() for a job without one.', at);
      END IF;
      RETURN NULL;
    END IF;
    v := spec -> 'unique_key';
    IF jsonb_typeof(v) <> 'string' OR length(v #>> '{}') NOT BETWEEN 1 AND 255 THEN
      RETURN format('Invalid %s option unique_key=%s: expected a string of 1 to 255 characters.', at, v);
    END IF;
    v := nullif(spec -> 'on_conflict', 'null');
    IF v IS NOT NULL AND (jsonb_typeof(v) <> 'string' OR (v #>> '{}') NOT IN ('keep', 'replace', 'keep-run-at')) THEN
      RETURN format('Invalid %s option on_conflict=%s: expected one of ''keep'', ''replace'', ''keep-run-at''.', at, v);
    END IF;
    mode := coalesce(v #>> '{}', 'keep');
    v := nullif(spec -> 'unique_for_ms', 'null');
    IF v IS NOT NULL THEN
      IF jsonb_typeof(v) <> 'number' OR v::text::numeric NOT BETWEEN 1 AND 315360000000 OR v::text::numeric <> trunc(v::text::numeric) THEN
        RETURN format('Invalid %s option unique_for_ms=%s: expected an integer from 1 to 315360000000 (ms).', at, v);
      END IF;
      IF mode <> 'keep' THEN
        RETURN format('Invalid %s option on_conflict=%s: expected ''keep'' with unique_for_ms (a window''s job is not replaced).', at, spec -> 'on_conflict');
      END IF;
    END IF;
    RETURN NULL;
  END $fn$`,
    // The jobs of one call, checked, then inserted; (id, duplicate, replaced) per job, in input order. `caller` is the
    // public function called (its name heads the messages).
    `
  CREATE OR REPLACE FUNCTION ${schema}.pg_queue_enqueue_jobs(jobs jsonb, caller text) RETURNS TABLE (id bigint, duplicate boolean, replaced boolean)
  LANGUAGE plpgsql VOLATILE ${settings} AS $fn$
  #variable_conflict use_column
  DECLARE
    -- The job's function, in its messages: enqueue_many's jobs are named as pg_queue_enqueue's, after their number.
    named text := CASE WHEN caller = 'pg_queue_enqueue_many' THEN 'pg_queue_enqueue' ELSE caller END;
    bad record;
    -- The call's jobs folded to one per key (see foldKeyedRows in unique-rows.ts), by position.
    f_queue text[]; f_payload jsonb[]; f_priority int[]; f_attempts int[]; f_run_at timestamptz[]; f_delay int8[];
    f_key text[]; f_mode text[]; f_window int8[]; f_ckey text[]; f_trace jsonb[];
    -- Per job of the call: its folded position, whether it is the first job there, its own mode, whether its key is live.
    j_pos int[]; j_first boolean[]; j_mode text[]; j_live boolean[];
    -- Per folded position: the outcome once known.
    o_id int8[]; o_outcome text[];
    pending int[];
    unseen int[];
    tries int := 0;
    got record;
  BEGIN
    IF jsonb_typeof(jobs) IS DISTINCT FROM 'array' THEN
      RAISE EXCEPTION '% expects a JSON array of jobs [{"queue": ..., "payload": ..., ...options}]; got %', caller, coalesce(jobs::text, 'NULL')
        USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT x.i - 1 AS n, pg_queue_enqueue_problem(x.e, named) AS problem INTO bad
    FROM jsonb_array_elements(jobs) WITH ORDINALITY AS x(e, i)
    WHERE pg_queue_enqueue_problem(x.e, named) IS NOT NULL
    ORDER BY x.i LIMIT 1;
    IF FOUND THEN
      RAISE EXCEPTION '%', CASE WHEN caller = 'pg_queue_enqueue_many' THEN format('%s: job #%s: %s', caller, bad.n, bad.problem) ELSE bad.problem END
        USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- No job with a key: the plain insert, ids drawn in input order (jobs of one run_at are claimed in id order).
    IF NOT EXISTS (SELECT 1 FROM jsonb_array_elements(jobs) AS x(e) WHERE nullif(x.e -> 'unique_key', 'null') IS NOT NULL) THEN
      RETURN QUERY
      WITH seq AS (
        SELECT pg_get_serial_sequence('background_jobs', 'id')::regclass AS s
      ), input AS MATERIALIZED (
        SELECT x.i, x.e, nextval((SELECT s FROM seq)) AS job_id
        FROM jsonb_array_elements(jobs) WITH ORDINALITY AS x(e, i) ORDER BY x.i
      ), inserted AS (
        INSERT INTO background_jobs (id, queue_name, payload, priority, max_attempts, run_at, concurrency_key, trace_context)
        SELECT i.job_id, i.e ->> 'queue', i.e -> 'payload', coalesce((i.e ->> 'priority')::numeric::int, 0), coalesce((i.e ->> 'max_attempts')::numeric::int, 5),
               coalesce((i.e ->> 'run_at')::timestamptz, now() + coalesce((i.e ->> 'delay_ms')::numeric::int8, 0) * interval '1 millisecond'),
               i.e ->> 'concurrency_key', nullif(i.e -> 'trace_context', 'null')
        FROM input AS i ORDER BY i.i
      )
      SELECT i.job_id, false, false FROM input AS i ORDER BY i.i;
      RETURN;
    END IF;

    -- Jobs of one key (live and window keys apart) fold into the first: a later 'replace' brings its payload, run_at
    -- and trace context, a later 'keep-run-at' its payload and trace context, a later 'keep' nothing.
    WITH spec AS (
      SELECT x.i AS ord, x.e ->> 'queue' AS q, x.e -> 'payload' AS p, coalesce((x.e ->> 'priority')::numeric::int, 0) AS pr,
             coalesce((x.e ->> 'max_attempts')::numeric::int, 5) AS ma, (x.e ->> 'run_at')::timestamptz AS ra,
             coalesce((x.e ->> 'delay_ms')::numeric::int8, 0) AS d, x.e ->> 'unique_key' AS k, coalesce(x.e ->> 'on_conflict', 'keep') AS mode,
             (x.e ->> 'unique_for_ms')::numeric::int8 AS w, x.e ->> 'concurrency_key' AS ck, nullif(x.e -> 'trace_context', 'null') AS tc
      FROM jsonb_array_elements(jobs) WITH ORDINALITY AS x(e, i)
    ), slotted AS (
      SELECT s.*, CASE WHEN s.k IS NULL THEN s.ord ELSE min(s.ord) OVER (PARTITION BY s.w IS NULL, s.q, s.k) END AS slot FROM spec AS s
    ), placed AS (
      SELECT s.*, (dense_rank() OVER (ORDER BY s.slot))::int AS pos FROM slotted AS s
    ), folded AS (
      SELECT s.pos,
        (array_agg(s.q ORDER BY s.ord))[1] AS q,
        (array_agg(s.p ORDER BY s.ord DESC) FILTER (WHERE s.ord = s.slot OR s.mode <> 'keep'))[1] AS p,
        (array_agg(s.pr ORDER BY s.ord))[1] AS pr,
        (array_agg(s.ma ORDER BY s.ord))[1] AS ma,
        (array_agg(s.ra ORDER BY s.ord DESC) FILTER (WHERE s.ord = s.slot OR s.mode = 'replace'))[1] AS ra,
        (array_agg(s.d ORDER BY s.ord DESC) FILTER (WHERE s.ord = s.slot OR s.mode = 'replace'))[1] AS d,
        (array_agg(s.k ORDER BY s.ord))[1] AS k,
        CASE WHEN bool_or(s.mode = 'replace' AND s.ord > s.slot) THEN 'replace'
             WHEN (array_agg(s.mode ORDER BY s.ord))[1] = 'keep' AND bool_or(s.mode = 'keep-run-at' AND s.ord > s.slot) THEN 'keep-run-at'
             ELSE (array_agg(s.mode ORDER BY s.ord))[1] END AS mode,
        (array_agg(s.w ORDER BY s.ord))[1] AS w,
        (array_agg(s.ck ORDER BY s.ord))[1] AS ck,
        (array_agg(s.tc ORDER BY s.ord DESC) FILTER (WHERE s.ord = s.slot OR s.mode <> 'keep'))[1] AS tc
      FROM placed AS s GROUP BY s.pos
    )
    SELECT
      (SELECT array_agg(f.q ORDER BY f.pos) FROM folded AS f), (SELECT array_agg(f.p ORDER BY f.pos) FROM folded AS f),
      (SELECT array_agg(f.pr ORDER BY f.pos) FROM folded AS f), (SELECT array_agg(f.ma ORDER BY f.pos) FROM folded AS f),
      (SELECT array_agg(f.ra ORDER BY f.pos) FROM folded AS f), (SELECT array_agg(f.d ORDER BY f.pos) FROM folded AS f),
      (SELECT array_agg(f.k ORDER BY f.pos) FROM folded AS f), (SELECT array_agg(f.mode ORDER BY f.pos) FROM folded AS f),
      (SELECT array_agg(f.w ORDER BY f.pos) FROM folded AS f), (SELECT array_agg(f.ck ORDER BY f.pos) FROM folded AS f),
      (SELECT array_agg(f.tc ORDER BY f.pos) FROM folded AS f),
      (SELECT array_agg(s.pos ORDER BY s.ord) FROM placed AS s), (SELECT array_agg(s.ord = s.slot ORDER BY s.ord) FROM placed AS s),
      (SELECT array_agg(s.mode ORDER BY s.ord) FROM placed AS s), (SELECT array_agg(s.w IS NULL ORDER BY s.ord) FROM placed AS s)
    INTO f_queue, f_payload, f_priority, f_attempts, f_run_at, f_delay, f_key, f_mode, f_window, f_ckey, f_trace, j_pos, j_first, j_mode, j_live;

    pending := ARRAY(SELECT generate_series(1, cardinality(f_queue)));
    o_id := array_fill(NULL::int8, ARRAY[cardinality(f_queue)]);
    o_outcome := array_fill(NULL::text, ARRAY[cardinality(f_queue)]);
    -- Phases 1 and 2 of the keyed insert of enqueue-keyed.sql.ts (insertKeyedJobs: read its Lock order comment), over the folded
    -- jobs still pending: the windows' key rows, then the inserts, each in (queue, key) order. A job whose key has a
    -- live holder comes back 'held' (its holder's id); one whose holder committed after this statement's snapshot (the
    -- insert waited for it, then found the conflict) comes back without an outcome and goes again, with the next
    -- statement's snapshot. The library runs each round as a transaction of its own; here the rounds share the
    -- caller's, so phase 3 waits until every round is done: a round after a phase 3 would insert while holding locks
    -- on holders of greater keys, and two calls could then each wait on the other.
    LOOP
      tries := tries + 1;
      IF tries > 10 THEN
        RAISE EXCEPTION '%: the holder of a unique key changed under 10 tries in a row (jobs of that key are being enqueued and finished faster than one enqueue can read the holder); nothing was stored, try again', caller;
      END IF;
      unseen := '{}';
      FOR got IN
        WITH input AS (
          SELECT t.* FROM ROWS FROM (unnest(f_queue), unnest(f_payload), unnest(f_priority), unnest(f_attempts), unnest(f_run_at), unnest(f_delay),
                                     unnest(f_key), unnest(f_window), unnest(f_ckey), unnest(f_trace))
            WITH ORDINALITY AS t(q, p, pr, ma, ra, d, k, w, ck, tc, ord)
          WHERE t.ord = ANY (pending)
        ), seq AS (
          SELECT pg_get_serial_sequence('background_jobs', 'id')::regclass AS s
        ), ids AS MATERIALIZED (
          SELECT i.ord, nextval((SELECT s FROM seq)) AS id FROM input AS i ORDER BY i.ord
        ), windows AS (
          -- Phase 1 of 3, the key rows of windows, in (queue, key) order.
          INSERT INTO background_job_keys AS h (queue_name, unique_key, held_until, job_id)
          SELECT i.q, i.k, now() + i.w * interval '1 millisecond', n.id FROM input AS i JOIN ids AS n ON n.ord = i.ord WHERE i.w IS NOT NULL
          ORDER BY i.q, i.k
          ON CONFLICT (queue_name, unique_key) DO UPDATE
          SET held_until = CASE WHEN h.held_until <= now() THEN EXCLUDED.held_until ELSE h.held_until END,
              job_id = CASE WHEN h.held_until <= now() THEN EXCLUDED.job_id ELSE h.job_id END
          RETURNING h.queue_name, h.unique_key, h.job_id
        ), inserted AS (
          -- Phase 2, the inserts, in (queue, key) order; a key with a live holder conflicts (no lock on the holder).
          INSERT INTO background_jobs (id, queue_name, payload, priority, max_attempts, run_at, unique_key, concurrency_key, trace_context)
          SELECT n.id, i.q, i.p, i.pr, i.ma, coalesce(i.ra, now() + i.d * interval '1 millisecond'), CASE WHEN i.w IS NULL THEN i.k END, i.ck, i.tc
          FROM input AS i JOIN ids AS n ON n.ord = i.ord
          WHERE i.w IS NULL OR n.id = ANY (coalesce((SELECT array_agg(x.job_id) FROM windows AS x), '{}')::int8[])
          ORDER BY i.q, i.k
          ON CONFLICT (queue_name, unique_key) WHERE unique_key IS NOT NULL AND status IN ('queued', 'processing') DO NOTHING
          RETURNING background_jobs.id
        )
        SELECT i.ord::int AS ord, coalesce(ins.id, x.job_id, live.id) AS job_id,
          CASE WHEN ins.id IS NOT NULL THEN 'inserted' WHEN x.job_id IS NOT NULL THEN 'duplicate' WHEN live.id IS NOT NULL THEN 'held' END AS outcome
        FROM input AS i JOIN ids AS n ON n.ord = i.ord
        LEFT JOIN inserted AS ins ON ins.id = n.id
        LEFT JOIN windows AS x ON i.w IS NOT NULL AND x.queue_name = i.q AND x.unique_key = i.k
        LEFT JOIN LATERAL (
          SELECT h.id FROM background_jobs AS h
          WHERE i.k IS NOT NULL AND i.w IS NULL AND ins.id IS NULL
            AND h.queue_name = i.q AND h.unique_key = i.k AND h.status IN ('queued', 'processing')
          LIMIT 1
        ) AS live ON true
        ORDER BY i.ord
      LOOP
        IF got.outcome IS NULL THEN
          unseen := unseen || got.ord;
        ELSE
          o_id[got.ord] := got.job_id;
          -- A holder that 'keep' leaves as it is: a duplicate of it now; the others are phase 3's.
          o_outcome[got.ord] := CASE WHEN got.outcome = 'held' AND f_mode[got.ord] = 'keep' THEN 'duplicate' ELSE got.outcome END;
        END IF;
      END LOOP;
      EXIT WHEN cardinality(unseen) = 0;
      pending := unseen;
    END LOOP;

    -- Phase 3, once: the holders that 'replace' and 'keep-run-at' update, as this statement's snapshot finds them
    -- (every holder phase 2 met is visible now), locked in (queue, key) order, then updated once every lock is held. A
    -- holder read ahead into a worker's buffer is put back queued with the new payload; a running one is never
    -- changed (the UPDATE re-checks each row's latest version): the job is then a duplicate of the holder phase 2 met.
    pending := ARRAY(SELECT x.n FROM generate_subscripts(o_outcome, 1) AS x(n) WHERE o_outcome[x.n] = 'held');
    IF cardinality(pending) > 0 THEN
      FOR got IN
        WITH input AS (
          SELECT t.* FROM ROWS FROM (unnest(f_queue), unnest(f_payload), unnest(f_run_at), unnest(f_delay), unnest(f_key), unnest(f_mode), unnest(f_trace))
            WITH ORDINALITY AS t(q, p, ra, d, k, mode, tc, ord)
          WHERE t.ord = ANY (pending)
        ), holders AS (
          SELECT j.id, j.status = 'processing' AS held FROM input AS i JOIN background_jobs AS j ON j.queue_name = i.q AND j.unique_key = i.k
          WHERE j.status = 'queued' OR (j.status = 'processing' AND j.buffered)
          ORDER BY j.queue_name, j.unique_key
          FOR UPDATE OF j
        ), replaced AS (
          UPDATE background_jobs AS j
          SET payload = i.p, run_at = CASE WHEN i.mode = 'replace' THEN coalesce(i.ra, now() + i.d * interval '1 millisecond') ELSE j.run_at END, updated_at = now(),
              status = 'queued', buffered = false, lease_expires_at = NULL, trace_context = coalesce(i.tc, j.trace_context)
          FROM input AS i
          WHERE j.queue_name = i.q AND j.unique_key = i.k AND (j.status = 'queued' OR (j.status = 'processing' AND j.buffered))
            AND j.id = ANY ((SELECT array_agg(h.id) FROM holders AS h)::int8[])
          -- held: the row sat in a worker's buffer (as locked by holders): its holder must drop its copy.
          RETURNING j.id, j.queue_name, i.ord, (SELECT h.held FROM holders AS h WHERE h.id = j.id) AS held
        )
        SELECT r.ord::int AS ord, r.id AS job_id,
          -- A replaced job may now run sooner than the workers' timers know: wake its queue (inserts: the trigger).
          (SELECT count(pg_notify('pg_queue_jobs', q.queue_name)) FROM (SELECT DISTINCT queue_name FROM replaced) AS q) AS notified,
          -- A replaced job that was read ahead: its holder checks its buffer before it starts anything from it.
          (SELECT count(pg_notify('pg_queue_review', q.queue_name)) FROM (SELECT DISTINCT queue_name FROM replaced WHERE held) AS q) AS reviewed
        FROM replaced AS r
      LOOP
        o_id[got.ord] := got.job_id;
        o_outcome[got.ord] := 'replaced';
      END LOOP;
    END IF;

    -- Each job's outcome: its position's ('held' and not replaced: a duplicate), and for a later job of the same key a
    -- duplicate of it, which changed the job when the job was still queued (see unfoldOutcomes in unique-rows.ts).
    RETURN QUERY
    SELECT o_id[j_pos[x.n]],
      (CASE WHEN j_first[x.n] THEN o_outcome[j_pos[x.n]] = 'inserted' ELSE false END) IS NOT TRUE,
      CASE WHEN j_first[x.n] THEN o_outcome[j_pos[x.n]] = 'replaced' AND j_mode[x.n] <> 'keep'
           ELSE o_outcome[j_pos[x.n]] IN ('inserted', 'replaced') AND j_mode[x.n] <> 'keep' AND j_live[x.n] END
    FROM generate_subscripts(j_pos, 1) AS x(n)
    ORDER BY x.n;
  END $fn$`,
    `
  CREATE OR REPLACE FUNCTION ${schema}.pg_queue_enqueue(${SCALAR_ARGUMENTS}
  ) RETURNS bigint
  LANGUAGE sql VOLATILE ${settings} AS $fn$
    SELECT e.id FROM pg_queue_enqueue_jobs(${SCALAR_SPEC}, 'pg_queue_enqueue') AS e
  $fn$`,
    `
  CREATE OR REPLACE FUNCTION ${schema}.pg_queue_enqueue_unique(${SCALAR_ARGUMENTS}
  ) RETURNS TABLE (id bigint, duplicate boolean, replaced boolean)
  LANGUAGE sql VOLATILE ${settings} AS $fn$
    SELECT e.id, e.duplicate, e.replaced FROM pg_queue_enqueue_jobs(${SCALAR_SPEC}, 'pg_queue_enqueue_unique') AS e
  $fn$`,
    `
  CREATE OR REPLACE FUNCTION ${schema}.pg_queue_enqueue_many(jobs jsonb) RETURNS TABLE (id bigint, duplicate boolean, replaced boolean)
  LANGUAGE sql VOLATILE ${settings} AS $fn$
    SELECT e.id, e.duplicate, e.replaced FROM pg_queue_enqueue_jobs(jobs, 'pg_queue_enqueue_many') AS e
  $fn$`,
    `COMMENT ON FUNCTION ${schema}.pg_queue_enqueue(${SCALAR_ARGUMENT_TYPES}) IS 'nestjs-pg-queue: adds one job, checked as QueueService.enqueue checks it; returns its id (the holder''s, for a duplicate of a unique key). docs/guides/sql-enqueue.md'`,
    `COMMENT ON FUNCTION ${schema}.pg_queue_enqueue_unique(${SCALAR_ARGUMENT_TYPES}) IS 'nestjs-pg-queue: pg_queue_enqueue with a required unique_key; returns (id, duplicate, replaced). docs/guides/sql-enqueue.md'`,
    `COMMENT ON FUNCTION ${schema}.pg_queue_enqueue_many(jsonb) IS 'nestjs-pg-queue: adds a JSON array of jobs [{"queue", "payload", ...options}]; returns (id, duplicate, replaced) per job, in order. docs/guides/sql-enqueue.md'`,
    `COMMENT ON FUNCTION ${schema}.pg_queue_enqueue_jobs(jsonb, text) IS 'nestjs-pg-queue internal: the body of pg_queue_enqueue, pg_queue_enqueue_unique and pg_queue_enqueue_many'`,
    `COMMENT ON FUNCTION ${schema}.pg_queue_enqueue_problem(jsonb, text) IS 'nestjs-pg-queue internal: what is wrong with one job of pg_queue_enqueue_jobs, or NULL'`,
  ];
}
