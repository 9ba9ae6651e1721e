// The successor's step of `onConflict: 'queue-after'` as LifoQueueAfter1764700000000 creates it. Frozen with that
// migration: a later change of the library's SQL never changes what the migration creates.

/**
 * The successor's step and the trigger function of the check at commit (see the class comment). Channel names are
 * written out (pg_queue_jobs: JOBS_CHANNEL), as in every frozen migration.
 */
export function successorFunctions(schema: string): string[] {
  const settings = `SET search_path = ${schema}, pg_temp`;
  return [
    // The successor of (q, k), promoted when no live job holds the key. `at_commit`: the check at the commit of the
    // transaction that wrote the successor's row (it holds that row's lock already), which takes a share lock on the
    // live holders, waiting for an end in flight, so that a holder's end either came before (the successor goes now)
    // or comes after this commit (and its statement's step sees the successor). Otherwise the step of a statement that
    // just ended a holder (its own writes visible here): a row another transaction holds is skipped (that transaction
    // is an enqueue of the key, which checks at its commit; or another step). A job that took the key meanwhile (a
    // holder this snapshot could not see) makes the promotion a unique violation: the successor then waits for it.
    `
  CREATE OR REPLACE FUNCTION ${schema}.pg_queue_successor_step(q text, k text, at_commit boolean) RETURNS boolean
  LANGUAGE plpgsql VOLATILE ${settings} AS $fn$
  DECLARE
    sid int8;
    promoted int8;
  BEGIN
    IF at_commit THEN
      SELECT s.job_id INTO sid FROM background_job_successors AS s WHERE s.queue_name = q AND s.unique_key = k FOR UPDATE;
    ELSE
      SELECT s.job_id INTO sid FROM background_job_successors AS s WHERE s.queue_name = q AND s.unique_key = k FOR UPDATE SKIP LOCKED;
    END IF;
    IF NOT FOUND THEN
      RETURN false;
    END IF;
    IF at_commit THEN
      PERFORM 1 FROM background_jobs AS j WHERE j.queue_name = q AND j.unique_key = k AND j.status IN ('queued', 'processing') FOR SHARE OF j;
      IF FOUND THEN
        RETURN false;
      END IF;
    ELSIF EXISTS (SELECT 1 FROM background_jobs AS j WHERE j.queue_name = q AND j.unique_key = k AND j.status IN ('queued', 'processing')) THEN
      RETURN false;
    END IF;
    BEGIN
      UPDATE background_jobs SET status = 'queued', run_at = greatest(run_at, now()), updated_at = now()
      WHERE id = sid AND status = 'blocked' AND flow_id IS NULL AND queue_name = q AND unique_key = k
      RETURNING id INTO promoted;
    EXCEPTION WHEN unique_violation THEN
      RETURN false;
    END;
    -- Promoted, or no longer blocked (cancelled, deleted): the key has no successor waiting any more.
    DELETE FROM background_job_successors WHERE queue_name = q AND unique_key = k;
    IF promoted IS NOT NULL THEN
      PERFORM pg_notify('pg_queue_jobs', q);
    END IF;
    RETURN promoted IS NOT NULL;
  END $fn$`,
    `
  CREATE OR REPLACE FUNCTION ${schema}.pg_queue_successor_checked() RETURNS trigger
  LANGUAGE plpgsql VOLATILE ${settings} AS $fn$
  BEGIN
    PERFORM pg_queue_successor_step(NEW.queue_name, NEW.unique_key, true);
    RETURN NULL;
  END $fn$`,
    `COMMENT ON FUNCTION ${schema}.pg_queue_successor_step(text, text, boolean) IS 'nestjs-pg-queue internal: promotes the waiting successor of a unique key (onConflict ''queue-after'') once no live job holds the key'`,
  ];
}
