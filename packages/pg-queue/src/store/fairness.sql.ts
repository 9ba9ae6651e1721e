// The SQL of fair share weights stored at runtime (README: "Fair share across keys"): one row per queue and key in
// background_queue_weights, which every fair claim reads (claim.sql.ts, FAIR_CANDIDATES).

export const FAIRNESS_SQL = {
  // $1 queue, $2 keys, $3 weights (NULL: remove the key's row, back to the option's weight), in one statement: a
  // change of several keys holds for every claim after it, all together.
  setWeights: `
    WITH given AS (
      SELECT k, w FROM unnest($2::text[], $3::int[]) AS g (k, w)
    ), removed AS (
      DELETE FROM background_queue_weights AS s USING given AS g WHERE s.queue_name = $1 AND s.key = g.k AND g.w IS NULL
    )
    INSERT INTO background_queue_weights (queue_name, key, weight, updated_at)
    SELECT $1, k, w, now() FROM given WHERE w IS NOT NULL
    ON CONFLICT (queue_name, key) DO UPDATE SET weight = EXCLUDED.weight, updated_at = now()`,

  // Every weight stored for the queue, by key.
  weights: `SELECT key, weight FROM background_queue_weights WHERE queue_name = $1 ORDER BY key`,
} as const;
