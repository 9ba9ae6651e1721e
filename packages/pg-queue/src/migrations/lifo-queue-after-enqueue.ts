// The SQL enqueue functions as LifoQueueAfter1764700000000 creates them (with `lifo` and 'queue-after'). Frozen with
// that migration: a later change of the library's SQL never changes what the migration creates.
import { enqueueProblemFunction } from './lifo-queue-after-problem.js';

export const OLD_SCALAR_ARGUMENT_TYPES = 'text, jsonb, timestamptz, bigint, integer, integer, text, text, bigint, text, jsonb';
export const SCALAR_ARGUMENT_TYPES = `${OLD_SCALAR_ARGUMENT_TYPES}, boolean`;

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
    trace_context jsonb DEFAULT NULL,
    lifo boolean DEFAULT NULL`;

/** A scalar call's job as pg_queue_enqueue_jobs reads it (see SqlEnqueue1764640000000). */
const SCALAR_SPEC = `jsonb_build_array(
      jsonb_build_object('queue', queue, 'run_at', run_at, 'delay_ms', delay_ms, 'priority', priority, 'max_attempts', max_attempts,
                         'unique_key', unique_key, 'on_conflict', on_conflict, 'unique_for_ms', unique_for_ms,
                         'concurrency_key', concurrency_key, 'trace_context', trace_context, 'lifo', lifo)
      || CASE WHEN payload IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('payload', payload) END)`;

/** The run_at of a folded job (pg_queue_enqueue_jobs' arrays, position `p`). */
const RUN_AT = (p: string) => `coalesce(f_run_at[${p}], now() + f_delay[${p}] * interval '1 millisecond')`;

/**
 * The SQL enqueue functions as SqlEnqueue1764640000000 and SqlEnqueueRunAt1764672000000 made them, plus `lifo` and
 * 'queue-after'. pg_queue_enqueue_jobs returns each job's outcome too ('inserted', 'replaced', 'duplicate',
 * 'successor': this job waits after the key's running holder, 'successor-replaced': the waiting successor took this
 * job's payload), which QueueService reads.
 */
export function enqueueFunctions(schema: string): string[] {
  const settings = `SET search_path = ${schema}, pg_temp`;
  return [
    enqueueProblemFunction(schema, settings),
    // The jobs of one call, checked, then inserted; (id, duplicate, replaced, outcome) per job, in input order.
    `
  CREATE OR REPLACE FUNCTION ${schema}.pg_queue_enqueue_jobs(jobs jsonb, caller text) RETURNS TABLE (id bigint, duplicate boolean, replaced boolean, outcome text)
  LANGUAGE plpgsql VOLATILE ${settings} AS $fn$
  #variable_conflict use_column
  DECLARE
    named text := CASE WHEN caller = 'pg_queue_enqueue_many' THEN 'pg_queue_enqueue' ELSE caller END;
    bad record;
    f_queue text[]; f_payload jsonb[]; f_priority int[]; f_attempts int[]; f_run_at timestamptz[]; f_delay int8[];
    f_key text[]; f_mode text[]; f_window int8[]; f_ckey text[]; f_trace jsonb[]; f_lifo boolean[];
    j_pos int[]; j_first boolean[]; j_mode text[]; j_live boolean[];
    o_id int8[]; o_outcome text[];
    pending int[];
    unseen int[];
    tries int := 0;
    got record;
    pos int;
    new_id int8;
    reg_job int8;
    got_id int8;
    h record;
    flagged_queues bigint;
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

    -- The queues of LIFO jobs say so, once (background_queues.lifo_jobs): their workers read it (pg_queue_limits) and
    -- claim with the variant that takes LIFO jobs first. A queue already marked is only read, never locked.
    WITH flagged AS (
      INSERT INTO background_queues AS b (queue_name, lifo_jobs)
      SELECT DISTINCT x.e ->> 'queue', true FROM jsonb_array_elements(jobs) AS x(e)
      WHERE x.e -> 'lifo' = 'true'
        AND NOT EXISTS (SELECT 1 FROM background_queues AS m WHERE m.queue_name = x.e ->> 'queue' AND m.lifo_jobs)
      ON CONFLICT (queue_name) DO UPDATE SET lifo_jobs = true, updated_at = now() WHERE b.lifo_jobs IS NOT TRUE
      RETURNING b.queue_name
    )
    SELECT count(pg_notify('pg_queue_limits', f.queue_name)) INTO flagged_queues FROM flagged AS f;

    -- No job with a key: the plain insert, ids drawn in input order (jobs of one run_at are claimed in id order).
    IF NOT EXISTS (SELECT 1 FROM jsonb_array_elements(jobs) AS x(e) WHERE nullif(x.e -> 'unique_key', 'null') IS NOT NULL) THEN
      RETURN QUERY
      WITH seq AS (
        SELECT pg_get_serial_sequence('background_jobs', 'id')::regclass AS s
      ), input AS MATERIALIZED (
        SELECT x.i, x.e, nextval((SELECT s FROM seq)) AS job_id
        FROM jsonb_array_elements(jobs) WITH ORDINALITY AS x(e, i) ORDER BY x.i
      ), inserted AS (
        INSERT INTO background_jobs (id, queue_name, payload, priority, max_attempts, run_at, concurrency_key, trace_context, lifo)
        SELECT i.job_id, i.e ->> 'queue', i.e -> 'payload', coalesce((i.e ->> 'priority')::numeric::int, 0), coalesce((i.e ->> 'max_attempts')::numeric::int, 5),
               coalesce((i.e ->> 'run_at')::timestamptz, now() + coalesce((i.e ->> 'delay_ms')::numeric::int8, 0) * interval '1 millisecond'),
               i.e ->> 'concurrency_key', nullif(i.e -> 'trace_context', 'null'), CASE WHEN i.e -> 'lifo' = 'true' THEN true END
        FROM input AS i ORDER BY i.i
      )
      SELECT i.job_id, false, false, 'inserted' FROM input AS i ORDER BY i.i;
      RETURN;
    END IF;

    -- Jobs of one key (live and window keys apart) fold into the first: a later 'replace' or 'queue-after' brings its
    -- payload, run_at and trace context, a later 'keep-run-at' its payload and trace context, a later 'keep' nothing. A
    -- key with a 'queue-after' job is enqueued 'queue-after'.
    WITH spec AS (
      SELECT x.i AS ord, x.e ->> 'queue' AS q, x.e -> 'payload' AS p, coalesce((x.e ->> 'priority')::numeric::int, 0) AS pr,
             coalesce((x.e ->> 'max_attempts')::numeric::int, 5) AS ma, (x.e ->> 'run_at')::timestamptz AS ra,
             coalesce((x.e ->> 'delay_ms')::numeric::int8, 0) AS d, x.e ->> 'unique_key' AS k, coalesce(x.e ->> 'on_conflict', 'keep') AS mode,
             (x.e ->> 'unique_for_ms')::numeric::int8 AS w, x.e ->> 'concurrency_key' AS ck, nullif(x.e -> 'trace_context', 'null') AS tc,
             x.e -> 'lifo' = 'true' AS lf
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
        (array_agg(s.ra ORDER BY s.ord DESC) FILTER (WHERE s.ord = s.slot OR s.mode IN ('replace', 'queue-after')))[1] AS ra,
        (array_agg(s.d ORDER BY s.ord DESC) FILTER (WHERE s.ord = s.slot OR s.mode IN ('replace', 'queue-after')))[1] AS d,
        (array_agg(s.k ORDER BY s.ord))[1] AS k,
        CASE WHEN bool_or(s.mode = 'queue-after') THEN 'queue-after'
             WHEN bool_or(s.mode = 'replace' AND s.ord > s.slot) THEN 'replace'
             WHEN (array_agg(s.mode ORDER BY s.ord))[1] = 'keep' AND bool_or(s.mode = 'keep-run-at' AND s.ord > s.slot) THEN 'keep-run-at'
             ELSE (array_agg(s.mode ORDER BY s.ord))[1] END AS mode,
        (array_agg(s.w ORDER BY s.ord))[1] AS w,
        (array_agg(s.ck ORDER BY s.ord))[1] AS ck,
        (array_agg(s.tc ORDER BY s.ord DESC) FILTER (WHERE s.ord = s.slot OR s.mode <> 'keep'))[1] AS tc,
        (array_agg(s.lf ORDER BY s.ord))[1] AS lf
      FROM placed AS s GROUP BY s.pos
    )
    SELECT
      (SELECT array_agg(f.q ORDER BY f.pos) FROM folded AS f), (SELECT array_agg(f.p ORDER BY f.pos) FROM folded AS f),
      (SELECT array_agg(f.pr ORDER BY f.pos) FROM folded AS f), (SELECT array_agg(f.ma ORDER BY f.pos) FROM folded AS f),
      (SELECT array_agg(f.ra ORDER BY f.pos) FROM folded AS f), (SELECT array_agg(f.d ORDER BY f.pos) FROM folded AS f),
      (SELECT array_agg(f.k ORDER BY f.pos) FROM folded AS f), (SELECT array_agg(f.mode ORDER BY f.pos) FROM folded AS f),
      (SELECT array_agg(f.w ORDER BY f.pos) FROM folded AS f), (SELECT array_agg(f.ck ORDER BY f.pos) FROM folded AS f),
      (SELECT array_agg(f.tc ORDER BY f.pos) FROM folded AS f), (SELECT array_agg(f.lf ORDER BY f.pos) FROM folded AS f),
      (SELECT array_agg(s.pos ORDER BY s.ord) FROM placed AS s), (SELECT array_agg(s.ord = s.slot ORDER BY s.ord) FROM placed AS s),
      (SELECT array_agg(s.mode ORDER BY s.ord) FROM placed AS s), (SELECT array_agg(s.w IS NULL ORDER BY s.ord) FROM placed AS s)
    INTO f_queue, f_payload, f_priority, f_attempts, f_run_at, f_delay, f_key, f_mode, f_window, f_ckey, f_trace, f_lifo, j_pos, j_first, j_mode, j_live;

    pending := ARRAY(SELECT generate_series(1, cardinality(f_queue)));
    o_id := array_fill(NULL::int8, ARRAY[cardinality(f_queue)]);
    o_outcome := array_fill(NULL::text, ARRAY[cardinality(f_queue)]);
    -- Phases 1 and 2 (see SqlEnqueue1764640000000). A 'queue-after' job whose key has a successor waiting is not
    -- inserted here, even when the key's holder has just ended: it goes to phase 4 ('held').
    LOOP
      tries := tries + 1;
      IF tries > 10 THEN
        RAISE EXCEPTION '%: the holder of a unique key changed under 10 tries in a row (jobs of that key are being enqueued and finished faster than one enqueue can read the holder); nothing was stored, try again', caller;
      END IF;
      unseen := '{}';
      FOR got IN
        WITH input AS (
          SELECT t.* FROM ROWS FROM (unnest(f_queue), unnest(f_payload), unnest(f_priority), unnest(f_attempts), unnest(f_run_at), unnest(f_delay),
                                     unnest(f_key), unnest(f_window), unnest(f_ckey), unnest(f_trace), unnest(f_mode), unnest(f_lifo))
            WITH ORDINALITY AS t(q, p, pr, ma, ra, d, k, w, ck, tc, mode, lf, ord)
          WHERE t.ord = ANY (pending)
        ), seq AS (
          SELECT pg_get_serial_sequence('background_jobs', 'id')::regclass AS s
        ), ids AS MATERIALIZED (
          SELECT i.ord, nextval((SELECT s FROM seq)) AS id FROM input AS i ORDER BY i.ord
        ), waiting AS MATERIALIZED (
          SELECT i.ord FROM input AS i
          WHERE i.mode = 'queue-after' AND EXISTS (SELECT 1 FROM background_job_successors AS s WHERE s.queue_name = i.q AND s.unique_key = i.k)
        ), windows AS (
          INSERT INTO background_job_keys AS h (queue_name, unique_key, held_until, job_id)
          SELECT i.q, i.k, now() + i.w * interval '1 millisecond', n.id FROM input AS i JOIN ids AS n ON n.ord = i.ord WHERE i.w IS NOT NULL
          ORDER BY i.q, i.k
          ON CONFLICT (queue_name, unique_key) DO UPDATE
          SET held_until = CASE WHEN h.held_until <= now() THEN EXCLUDED.held_until ELSE h.held_until END,
              job_id = CASE WHEN h.held_until <= now() THEN EXCLUDED.job_id ELSE h.job_id END
          RETURNING h.queue_name, h.unique_key, h.job_id
        ), inserted AS (
          INSERT INTO background_jobs (id, queue_name, payload, priority, max_attempts, run_at, unique_key, concurrency_key, trace_context, lifo)
          SELECT n.id, i.q, i.p, i.pr, i.ma, coalesce(i.ra, now() + i.d * interval '1 millisecond'), CASE WHEN i.w IS NULL THEN i.k END, i.ck, i.tc,
                 CASE WHEN i.lf THEN true END
          FROM input AS i JOIN ids AS n ON n.ord = i.ord
          WHERE (i.w IS NULL OR n.id = ANY (coalesce((SELECT array_agg(x.job_id) FROM windows AS x), '{}')::int8[]))
            AND i.ord <> ALL (coalesce((SELECT array_agg(wt.ord) FROM waiting AS wt), '{}')::bigint[])
          ORDER BY i.q, i.k
          ON CONFLICT (queue_name, unique_key) WHERE unique_key IS NOT NULL AND status IN ('queued', 'processing') DO NOTHING
          RETURNING background_jobs.id
        )
        SELECT i.ord::int AS ord, coalesce(ins.id, x.job_id, live.id) AS job_id,
          CASE WHEN ins.id IS NOT NULL THEN 'inserted' WHEN x.job_id IS NOT NULL THEN 'duplicate' WHEN live.id IS NOT NULL THEN 'held'
               WHEN i.ord IN (SELECT wt.ord FROM waiting AS wt) THEN 'held' END AS outcome
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
          o_outcome[got.ord] := CASE WHEN got.outcome = 'held' AND f_mode[got.ord] = 'keep' THEN 'duplicate' ELSE got.outcome END;
        END IF;
      END LOOP;
      EXIT WHEN cardinality(unseen) = 0;
      pending := unseen;
    END LOOP;

    -- Phase 3, once: the queued holders that 'replace' and 'keep-run-at' update (see SqlEnqueue1764640000000).
    pending := ARRAY(SELECT x.n FROM generate_subscripts(o_outcome, 1) AS x(n) WHERE o_outcome[x.n] = 'held' AND f_mode[x.n] <> 'queue-after');
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
          RETURNING j.id, j.queue_name, i.ord, (SELECT h.held FROM holders AS h WHERE h.id = j.id) AS held
        )
        SELECT r.ord::int AS ord, r.id AS job_id,
          (SELECT count(pg_notify('pg_queue_jobs', q.queue_name)) FROM (SELECT DISTINCT queue_name FROM replaced) AS q) AS notified,
          (SELECT count(pg_notify('pg_queue_review', q.queue_name)) FROM (SELECT DISTINCT queue_name FROM replaced WHERE held) AS q) AS reviewed
        FROM replaced AS r
      LOOP
        o_id[got.ord] := got.job_id;
        o_outcome[got.ord] := 'replaced';
      END LOOP;
    END IF;

    -- Phase 4: 'queue-after' jobs whose key is held (or has a successor waiting), one key at a time in (queue, key)
    -- order, each statement with a fresh snapshot (READ COMMITTED), until one of four things happened:
    -- the waiting successor took the payload and run_at; a holder that has not started (queued, or read ahead into a
    -- worker's buffer) took them, as with 'replace'; a holder that started got this job as its successor (blocked with
    -- the key, promoted when the holder ends: pg_queue_successor_step); or no holder is left and the job is inserted.
    -- The key's successor row is taken first, by an INSERT that waits for (and then locks) a row another enqueue holds
    -- or just committed: the enqueues of one key take turns here, and the check at commit (the row's trigger) makes
    -- sure a holder that ended meanwhile does not leave the successor waiting.
    FOR pos IN SELECT x.n FROM generate_subscripts(o_outcome, 1) AS x(n)
               WHERE o_outcome[x.n] = 'held' AND f_mode[x.n] = 'queue-after' ORDER BY f_queue[x.n], f_key[x.n] LOOP
      new_id := nextval(pg_get_serial_sequence('background_jobs', 'id')::regclass);
      tries := 0;
      LOOP
        tries := tries + 1;
        IF tries > 10 THEN
          RAISE EXCEPTION '%: the holder of unique key % changed under 10 tries in a row; nothing was stored, try again', caller, to_jsonb(f_key[pos]);
        END IF;
        INSERT INTO background_job_successors AS s (queue_name, unique_key, job_id) VALUES (f_queue[pos], f_key[pos], new_id)
        ON CONFLICT (queue_name, unique_key) DO UPDATE SET updated_at = now()
        RETURNING s.job_id INTO reg_job;
        IF reg_job <> new_id THEN
          UPDATE background_jobs AS j
          SET payload = f_payload[pos], run_at = ${RUN_AT('pos')}, trace_context = coalesce(f_trace[pos], j.trace_context), updated_at = now()
          WHERE j.id = reg_job AND j.status = 'blocked' AND j.flow_id IS NULL
          RETURNING j.id INTO got_id;
          IF got_id IS NOT NULL THEN
            o_id[pos] := got_id;
            o_outcome[pos] := 'successor-replaced';
            EXIT;
          END IF;
          -- The successor it named is no longer waiting (cancelled, deleted, or promoted and its row not yet forgotten).
          UPDATE background_job_successors SET job_id = new_id, updated_at = now() WHERE queue_name = f_queue[pos] AND unique_key = f_key[pos];
        END IF;
        SELECT j.id, j.buffered INTO h FROM background_jobs AS j
        WHERE j.queue_name = f_queue[pos] AND j.unique_key = f_key[pos] AND (j.status = 'queued' OR (j.status = 'processing' AND j.buffered))
        FOR UPDATE OF j;
        IF FOUND THEN
          UPDATE background_jobs AS j
          SET payload = f_payload[pos], run_at = ${RUN_AT('pos')}, updated_at = now(),
              status = 'queued', buffered = false, lease_expires_at = NULL, trace_context = coalesce(f_trace[pos], j.trace_context)
          WHERE j.id = h.id;
          DELETE FROM background_job_successors WHERE queue_name = f_queue[pos] AND unique_key = f_key[pos];
          PERFORM pg_notify('pg_queue_jobs', f_queue[pos]);
          IF h.buffered THEN
            PERFORM pg_notify('pg_queue_review', f_queue[pos]);
          END IF;
          o_id[pos] := h.id;
          o_outcome[pos] := 'replaced';
          EXIT;
        END IF;
        SELECT j.id, j.status, j.buffered INTO h FROM background_jobs AS j
        WHERE j.queue_name = f_queue[pos] AND j.unique_key = f_key[pos] AND j.status IN ('queued', 'processing')
        LIMIT 1;
        IF FOUND THEN
          -- Queued or read ahead since the look above: look again (it is replaced then).
          CONTINUE WHEN h.status = 'queued' OR h.buffered;
          INSERT INTO background_jobs (id, queue_name, payload, priority, max_attempts, run_at, unique_key, concurrency_key, trace_context, lifo, status)
          VALUES (new_id, f_queue[pos], f_payload[pos], f_priority[pos], f_attempts[pos], ${RUN_AT('pos')}, f_key[pos], f_ckey[pos], f_trace[pos],
                  CASE WHEN f_lifo[pos] THEN true END, 'blocked');
          o_id[pos] := new_id;
          o_outcome[pos] := 'successor';
          EXIT;
        END IF;
        INSERT INTO background_jobs (id, queue_name, payload, priority, max_attempts, run_at, unique_key, concurrency_key, trace_context, lifo)
        VALUES (new_id, f_queue[pos], f_payload[pos], f_priority[pos], f_attempts[pos], ${RUN_AT('pos')}, f_key[pos], f_ckey[pos], f_trace[pos],
                CASE WHEN f_lifo[pos] THEN true END)
        ON CONFLICT (queue_name, unique_key) WHERE unique_key IS NOT NULL AND status IN ('queued', 'processing') DO NOTHING
        RETURNING background_jobs.id INTO got_id;
        IF got_id IS NOT NULL THEN
          DELETE FROM background_job_successors WHERE queue_name = f_queue[pos] AND unique_key = f_key[pos];
          o_id[pos] := got_id;
          o_outcome[pos] := 'inserted';
          EXIT;
        END IF;
      END LOOP;
    END LOOP;

    -- Each job's outcome: its position's ('held' and not replaced: a duplicate), and for a later job of the same key a
    -- duplicate of it, which changed the job when the job was still queued, or the successor's payload.
    RETURN QUERY
    WITH each AS (
      SELECT x.n, o_id[j_pos[x.n]] AS job_id,
        CASE WHEN j_first[x.n] THEN
               CASE WHEN o_outcome[j_pos[x.n]] = 'replaced' AND j_mode[x.n] = 'keep' THEN 'duplicate'
                    WHEN o_outcome[j_pos[x.n]] IN ('inserted', 'replaced', 'successor', 'successor-replaced') THEN o_outcome[j_pos[x.n]]
                    ELSE 'duplicate' END
             WHEN j_mode[x.n] = 'keep' OR NOT j_live[x.n] THEN 'duplicate'
             WHEN o_outcome[j_pos[x.n]] IN ('successor', 'successor-replaced') THEN 'successor-replaced'
             WHEN o_outcome[j_pos[x.n]] IN ('inserted', 'replaced') THEN 'replaced'
             ELSE 'duplicate' END AS outcome
      FROM generate_subscripts(j_pos, 1) AS x(n)
    )
    SELECT e.job_id, e.outcome NOT IN ('inserted', 'successor'), e.outcome IN ('replaced', 'successor-replaced'), e.outcome
    FROM each AS e ORDER BY e.n;
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
    `COMMENT ON FUNCTION ${schema}.pg_queue_enqueue_jobs(jsonb, text) IS 'nestjs-pg-queue internal: the body of pg_queue_enqueue, pg_queue_enqueue_unique and pg_queue_enqueue_many (and of QueueService''s enqueues of LIFO and queue-after jobs with a unique key)'`,
    `COMMENT ON FUNCTION ${schema}.pg_queue_enqueue_problem(jsonb, text) IS 'nestjs-pg-queue internal: what is wrong with one job of pg_queue_enqueue_jobs, or NULL'`,
  ];
}
