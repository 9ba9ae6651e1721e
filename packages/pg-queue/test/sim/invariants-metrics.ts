// The simulation's invariants for the metrics (issue 40: "Events and metrics agree with the tables"): each process's
// job counters (PgQueueMetricsModule, read after the drain: sim-worker.ts, readCounters) against what the tables say
// that process wrote, as in invariants.ts.
import type pg from 'pg';
import type { Violation } from './invariants.js';
import type { SimMetrics } from './sim-worker.js';

/** A write whose answer a connection fault or a restart may have taken, so its process never counted it. */
const SLACK_MS = 2_000;

/**
 * `metrics.completed-differs`, `metrics.dead-differs`: a process still running after the drain counted, by queue,
 * exactly the completions its worker id wrote (`processing -> completed`, its id the holder), and exactly the jobs it
 * failed for good (`processing -> failed`, not the sweeper's "lease expired"). A process whose connections a fault cut
 * or black-holed is not judged (a committed outcome whose answer never came back is one the process could not
 * count), and around a restart of PostgreSQL (sim_outages) the writes within 2 s of it may be missing from the
 * counters.
 */
export async function metricsMatchRows(db: pg.Pool, metrics: SimMetrics[]): Promise<Violation[]> {
  if (metrics.length === 0) return [];
  const workers = metrics.map((m) => m.worker);
  const { rows: cut } = await db.query<{ worker: string }>(`SELECT DISTINCT worker FROM fault_faults WHERE worker = ANY($1) AND signal IN ('CUT', 'BLACKHOLE')`, [workers]);
  const { rows } = await db.query<{ worker: string; queue: string; completed: number; dead: number; near_outage: number }>(
    `SELECT t.new_locked_by AS worker, coalesce(j.queue_name, r.queue, '?') AS queue,
            count(*) FILTER (WHERE t.new_status = 'completed')::int AS completed,
            count(*) FILTER (WHERE t.new_status = 'failed' AND coalesce(t.new_error, '') NOT LIKE 'lease expired%')::int AS dead,
            count(*) FILTER (WHERE EXISTS (SELECT 1 FROM sim_outages o WHERE t.at BETWEEN o.from_at - $2 * interval '1 millisecond' AND o.until_at + $2 * interval '1 millisecond'))::int AS near_outage
     FROM sim_transitions t
     LEFT JOIN background_jobs_all j ON j.id = t.job_id
     LEFT JOIN LATERAL (SELECT s.queue FROM sim_runs s WHERE s.job_id = t.job_id LIMIT 1) r ON true
     WHERE t.op = 'update' AND t.old_status = 'processing' AND t.new_status IN ('completed', 'failed') AND t.new_locked_by = ANY($1)
     GROUP BY 1, 2`,
    [workers, SLACK_MS],
  );
  const out: Violation[] = [];
  for (const m of metrics) {
    if (cut.some((c) => c.worker === m.worker)) continue;
    const queues = new Set([...Object.keys(m.counters), ...rows.filter((r) => r.worker === m.worker).map((r) => r.queue)]);
    for (const queue of queues) {
      const row = rows.find((r) => r.worker === m.worker && r.queue === queue);
      const checks = [
        ['completed', m.counters[queue]?.jobs_completed ?? 0, row?.completed ?? 0],
        ['dead', m.counters[queue]?.jobs_dead ?? 0, row?.dead ?? 0],
      ] as const;
      for (const [name, counted, written] of checks) {
        if (counted !== written && Math.abs(counted - written) > (row?.near_outage ?? 0)) {
          out.push({ invariant: `metrics.${name}-differs`, jobIds: [], detail: `${m.worker}, queue ${queue}: pg_queue_jobs_${name}_total says ${counted}, the tables say it wrote ${written}` });
        }
      }
    }
  }
  return out;
}
