// The dashboard's reads of a queue's fair share state (migration FairShare1764690000000), for the queue page.

export const DASHBOARD_FAIRNESS_SQL = {
  // A fair claim has run for the queue somewhere (it sets the queue's virtual clock), or a weight is stored for it: the
  // queue is fair even when no handler of it runs in this process.
  fairSeen: `
    SELECT EXISTS (SELECT 1 FROM background_queues WHERE queue_name = $1 AND fair_clock IS NOT NULL)
        OR EXISTS (SELECT 1 FROM background_queue_weights WHERE queue_name = $1) AS seen`,

  // The stored weights by key, the first $2 (by the primary key's order).
  weights: `SELECT key, weight FROM background_queue_weights WHERE queue_name = $1 ORDER BY key LIMIT $2`,
} as const;
