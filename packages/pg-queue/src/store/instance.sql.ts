// The SQL of the instances registry (README: "Instances"): each process that runs workers writes its own row every
// heartbeatMs; everyone reads them. Times from the database clock: a row is live while now() < expires_at.

export const INSTANCE_SQL = {
  // $1 id (the workerId), $2 host, $3 pid, $4 queues as JSON, $5 ms until the row counts as gone. started_at is kept
  // from the first write (a row re-made after the sweeper forgot it starts anew).
  register: `
    INSERT INTO background_instances (id, host, pid, queues, started_at, last_seen_at, expires_at)
    VALUES ($1, $2, $3, $4::jsonb, now(), now(), now() + $5::int8 * interval '1 millisecond')
    ON CONFLICT (id) DO UPDATE
    SET host = EXCLUDED.host, pid = EXCLUDED.pid, queues = EXCLUDED.queues, last_seen_at = now(), expires_at = EXCLUDED.expires_at`,

  // A clean stop: the row goes at once, so no one reads a stopped process as live until it would have expired.
  deregister: `DELETE FROM background_instances WHERE id = $1`,

  // Every row, live ones first, newest first; `live` and the ages from the database clock.
  list: `
    SELECT id, host, pid, queues, started_at, last_seen_at, expires_at, now() < expires_at AS live,
           (extract(epoch FROM now() - last_seen_at) * 1000)::float8 AS seen_ms_ago
    FROM background_instances
    ORDER BY now() < expires_at DESC, started_at DESC, id
    LIMIT $1`,

  // The sweeper's clean-up: rows that expired more than $1 ms ago (a process that died without deregistering).
  forgetExpired: `DELETE FROM background_instances WHERE expires_at < now() - $1::int8 * interval '1 millisecond'`,
} as const;
