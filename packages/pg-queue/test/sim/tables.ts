// The simulation's own tables, next to the queue's (and the fault suite's fault_faults / fault_held / fault_eager /
// fault_crashes, made by createFaultTables). Every clock here is the database's (clock_timestamp()).
export const SIM_TABLES = `
  -- The run log: one row per handler call, written by the handler as its first act (sim-worker.ts); seq counts the
  -- process's handler calls synchronously, so it orders the starts of one process exactly.
  CREATE TABLE sim_runs (
    id bigserial PRIMARY KEY, job_id int8 NOT NULL, attempt int NOT NULL, worker text NOT NULL, pid int NOT NULL, seq int NOT NULL,
    queue text NOT NULL, payload_hash text NOT NULL, behaviour text NOT NULL,
    flow_id int8, flow_ref text, compensates int8, row_status text, row_buffered boolean, row_locked_by text, concurrency_key text,
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(), ended_at timestamptz, outcome text);
  CREATE INDEX sim_runs_job_idx ON sim_runs (job_id);
  -- Every enqueue call's jobs: committed or rolled back, and what a unique enqueue answered.
  CREATE TABLE sim_enqueues (
    job_id int8 NOT NULL, kind text NOT NULL, committed boolean NOT NULL, unique_key text, on_conflict text, answer text,
    by_worker text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp(), concurrency_key text);
  -- Operator actions: when each was sent (t0) and answered (t1), the jobs it named, what it answered.
  CREATE TABLE sim_ops (
    id bigserial PRIMARY KEY, op text NOT NULL, job_ids int8[] NOT NULL DEFAULT '{}', detail jsonb,
    t0 timestamptz NOT NULL, t1 timestamptz);
  -- Every change of a job's row that matters (status, attempts, buffered, payload, holder), by a row trigger:
  -- the history the invariants read (and print). txid groups the rows of one claim.
  CREATE TABLE sim_transitions (
    id bigserial PRIMARY KEY, job_id int8 NOT NULL, op text NOT NULL, old_status text, new_status text, old_attempts int, new_attempts int,
    old_buffered boolean, new_buffered boolean, old_hash text, new_hash text, old_locked_by text, new_locked_by text, priority int,
    -- The error the row holds after a change of status or error (its first line, clipped): an attempt its worker
    -- failed (a timeout) is over for the invariants even while its handler still runs (a hung handler ignores its
    -- signal). A second timeout writes the same text, so the status change records it too.
    new_error text,
    -- Set on the deletion a completion made (completedRetentionMs 0) only: whether the row was awaited (waitFor had
    -- marked it), which such a completion must keep (invariants-waits.ts).
    deleted_awaited boolean,
    -- The job's flow and, for a compensation, the step it undoes (from the row at every change): which flow a job
    -- belonged to stays known after the pruner deleted it (invariants.ts, flowPromises and flowPrunedWhileLive).
    flow_id int8, compensates int8,
    txid int8 NOT NULL DEFAULT txid_current(), at timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- The clock the rate limit counts starts by: the claim statement's statement_timestamp() (claim.sql.ts).
    stmt_at timestamptz NOT NULL DEFAULT statement_timestamp());
  CREATE INDEX sim_transitions_job_idx ON sim_transitions (job_id);
  -- Every job a recurring schedule fired (its payload's _schedule), by the same trigger: kept when the job is pruned.
  CREATE TABLE sim_fires (job_id int8 NOT NULL, name text NOT NULL, fire_at timestamptz NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
  CREATE FUNCTION sim_track() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    IF TG_OP = 'INSERT' THEN
      INSERT INTO sim_transitions (job_id, op, new_status, new_attempts, new_buffered, new_hash, new_locked_by, priority, flow_id, compensates)
      VALUES (NEW.id, 'insert', NEW.status::text, NEW.attempts, NEW.buffered, md5(NEW.payload::text), NEW.locked_by, NEW.priority, NEW.flow_id, NEW.compensates);
      IF NEW.payload ? '_schedule' THEN
        INSERT INTO sim_fires (job_id, name, fire_at) VALUES (NEW.id, NEW.payload->'_schedule'->>'name', (NEW.payload->'_schedule'->>'fireAt')::timestamptz);
      END IF;
      RETURN NULL;
    ELSIF TG_OP = 'DELETE' THEN
      -- Only a completion with completedRetentionMs 0 deletes a row in processing (deleteCompletedJobs; an operator's
      -- delete skips them): recorded as the completion it is, then the deletion of a completed row.
      IF OLD.status = 'processing' THEN
        INSERT INTO sim_transitions (job_id, op, old_status, new_status, old_attempts, new_attempts, old_buffered, new_buffered, old_hash, new_hash, old_locked_by, new_locked_by, priority, flow_id, compensates)
        VALUES (OLD.id, 'update', 'processing', 'completed', OLD.attempts, OLD.attempts + OLD.buffered::int, OLD.buffered, false,
                md5(OLD.payload::text), md5(OLD.payload::text), OLD.locked_by, OLD.locked_by, OLD.priority, OLD.flow_id, OLD.compensates);
        INSERT INTO sim_transitions (job_id, op, old_status, old_attempts, old_buffered, old_hash, old_locked_by, priority, deleted_awaited, flow_id, compensates)
        VALUES (OLD.id, 'delete', 'completed', OLD.attempts + OLD.buffered::int, false, md5(OLD.payload::text), OLD.locked_by, OLD.priority, coalesce(OLD.awaited, false), OLD.flow_id, OLD.compensates);
        RETURN NULL;
      END IF;
      INSERT INTO sim_transitions (job_id, op, old_status, old_attempts, old_buffered, old_hash, old_locked_by, priority, flow_id, compensates)
      VALUES (OLD.id, 'delete', OLD.status::text, OLD.attempts, OLD.buffered, md5(OLD.payload::text), OLD.locked_by, OLD.priority, OLD.flow_id, OLD.compensates);
      RETURN NULL;
    END IF;
    IF (OLD.status, OLD.attempts, OLD.buffered, OLD.payload, OLD.locked_by) IS DISTINCT FROM (NEW.status, NEW.attempts, NEW.buffered, NEW.payload, NEW.locked_by) THEN
      INSERT INTO sim_transitions (job_id, op, old_status, new_status, old_attempts, new_attempts, old_buffered, new_buffered, old_hash, new_hash, old_locked_by, new_locked_by, priority, flow_id, compensates, new_error)
      VALUES (NEW.id, 'update', OLD.status::text, NEW.status::text, OLD.attempts, NEW.attempts, OLD.buffered, NEW.buffered,
              md5(OLD.payload::text), md5(NEW.payload::text), OLD.locked_by, NEW.locked_by, NEW.priority, NEW.flow_id, NEW.compensates,
              CASE WHEN NEW.last_error IS DISTINCT FROM OLD.last_error OR NEW.status IS DISTINCT FROM OLD.status
                THEN left(split_part(NEW.last_error, E'\n', 1), 120) END);
    END IF;
    RETURN NULL;
  END $$;
  CREATE TRIGGER sim_track AFTER INSERT OR UPDATE OR DELETE ON background_jobs FOR EACH ROW EXECUTE FUNCTION sim_track();
  -- Every change of a flow's status, by a row trigger on background_flows: when a flow began compensating and when
  -- it reached each end, so that the flow invariants judge its jobs as they were then (an operator's retry after
  -- the end runs a job alone and changes the job, not the flow: docs/guides/flows.md, Cancel, retry).
  CREATE TABLE sim_flow_transitions (
    id bigserial PRIMARY KEY, flow_id int8 NOT NULL, old_status text, new_status text NOT NULL,
    txid int8 NOT NULL DEFAULT txid_current(), at timestamptz NOT NULL DEFAULT clock_timestamp());
  CREATE FUNCTION sim_track_flow() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    IF TG_OP = 'INSERT' OR OLD.status IS DISTINCT FROM NEW.status THEN
      INSERT INTO sim_flow_transitions (flow_id, old_status, new_status) VALUES (NEW.id, CASE WHEN TG_OP = 'UPDATE' THEN OLD.status END, NEW.status);
    END IF;
    RETURN NULL;
  END $$;
  CREATE TRIGGER sim_track_flow AFTER INSERT OR UPDATE ON background_flows FOR EACH ROW EXECUTE FUNCTION sim_track_flow();
  -- What handlers write for the app (behaviour 'write') and what durable steps' functions record when they run.
  CREATE TABLE sim_app (job_id int8 NOT NULL, attempt int NOT NULL, worker text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
  -- The app rows of transactional handlers (queue txq), written through job.manager: one per completed job, none else.
  CREATE TABLE sim_tx (job_id int8 NOT NULL, attempt int NOT NULL, worker text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
  -- What QueueService.waitFor answered the enqueuing process for each job it waited on: a result, a failure's
  -- status (JobFailedError), a timeout or another error, with the database clock of the answer.
  CREATE TABLE sim_waits (job_id int8 PRIMARY KEY, since timestamptz NOT NULL DEFAULT clock_timestamp(), answer text, status text, result jsonb, answered_at timestamptz);
  -- Every second or more a process's event loop was held (sim-worker-records.ts, watchOwnStalls), written at its end:
  -- what excuses a late answer of waitFor in that process (a lag too short to be a fault of its runs).
  -- Every restart of PostgreSQL (faults.ts, restartServer): from the stop until the processes could log in again.
  CREATE TABLE sim_outages (from_at timestamptz NOT NULL, until_at timestamptz NOT NULL);
  CREATE TABLE sim_lags (worker text NOT NULL, lag_ms int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
  CREATE TABLE sim_steps (job_id int8 NOT NULL, name text NOT NULL, attempt int NOT NULL, worker text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
  -- Processes that ended: how (signal or code), whether the simulation meant it, and how long a SIGTERM took.
  CREATE TABLE sim_queue_changes (queue text NOT NULL, limits jsonb, blocked_until timestamptz, at timestamptz NOT NULL DEFAULT clock_timestamp());
  -- Limits changed at runtime and a partner's 429 blocks (issue 42): every change of a queue's row, by the database clock.
  CREATE FUNCTION sim_track_queue() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    IF TG_OP = 'INSERT' OR NEW.limits IS DISTINCT FROM OLD.limits OR NEW.blocked_until IS DISTINCT FROM OLD.blocked_until THEN
      INSERT INTO sim_queue_changes (queue, limits, blocked_until) VALUES (NEW.queue_name, NEW.limits, NEW.blocked_until);
    END IF;
    RETURN NULL;
  END $$;
  CREATE TRIGGER sim_track_queue AFTER INSERT OR UPDATE ON background_queues FOR EACH ROW EXECUTE FUNCTION sim_track_queue();
  CREATE TABLE sim_exits (worker text NOT NULL, pid int NOT NULL, how text NOT NULL, meant boolean NOT NULL, ms int, at timestamptz NOT NULL DEFAULT clock_timestamp());`;
