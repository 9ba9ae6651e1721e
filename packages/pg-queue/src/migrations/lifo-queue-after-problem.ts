// pg_queue_enqueue_problem as LifoQueueAfter1764700000000 creates it: what is wrong with one job given to the SQL
// enqueue functions (the checks of QueueService.enqueue, with `lifo` and 'queue-after'), or NULL. Frozen with that
// migration.

/** The function's text; `settings` is the enqueue functions' SET clause (their search_path). */
export function enqueueProblemFunction(schema: string, settings: string): string {
  return (
    `
  CREATE OR REPLACE FUNCTION ${schema}.pg_queue_enqueue_problem(spec jsonb, caller text) RETURNS text
  LANGUAGE plpgsql STABLE ${settings} AS $fn$
  DECLARE
    known constant text[] := ARRAY['queue', 'payload', 'run_at', 'delay_ms', 'priority', 'max_attempts', 'unique_key', 'on_conflict',
                                   'unique_for_ms', 'concurrency_key', 'trace_context', 'lifo'];
    stray text;
    queue text;
    at text;
    v jsonb;
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
      BEGIN
        ra := (v #>> '{}')::timestamptz;
      EXCEPTION WHEN data_exception THEN
        RETURN format('Invalid %s option run_at=%s: not a date-time that exists (%s); expected a real date-time from year 1 to 9999 (in JSON: ISO 8601 with its UTC offset, e.g. "2026-12-01T08:00:00Z").', at, v, SQLERRM);
      END;
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
    v := nullif(spec -> 'lifo', 'null');
    IF v IS NOT NULL AND jsonb_typeof(v) <> 'boolean' THEN
      RETURN format('Invalid %s option lifo=%s: expected true or false.', at, v);
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
    IF v IS NOT NULL AND (jsonb_typeof(v) <> 'string' OR (v #>> '{}') NOT IN ('keep', 'replace', 'keep-run-at', 'queue-after')) THEN
      RETURN format('Invalid %s option on_conflict=%s: expected one of ''keep'', ''replace'', ''keep-run-at'', ''queue-after''.', at, v);
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
  END $fn$`
  );
}
