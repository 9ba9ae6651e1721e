import type { Connection } from '../connection.js';
import { formatDuration } from '../duration.js';
import { MetricsStore } from '../../store/metrics.store.js';
import { stalledInstances, unservedQueues, type InstanceRecord } from '../../store/instance.store.js';
import type { CheckResult } from './check-result.js';

const DUE_READ_TIMEOUT_MS = 5_000;

/**
 * Progress, by the database clock: queues with due jobs that no live instance serves (also when no instance has
 * registered at all: the instances check stays silent then, for a rolling upgrade from a version before the
 * registry), and live instances that write their row but whose claims of a queue with due jobs and idle slots have
 * not answered for their own `health.claimStalledAfterMs` (a wedged claim loop).
 */
export async function progress(connection: Connection): Promise<CheckResult> {
  const store = connection.jobStore();
  let instances: InstanceRecord[];
  try {
    instances = await store.instances.list();
  } catch (error) {
    if ((error as { code?: unknown }).code !== '42P01') throw error;
    return { check: 'progress', state: 'warn', detail: 'table background_instances does not exist (its migration is pending)', hint: 'run `pg-queue migrate`' };
  }
  const oldest = await new MetricsStore(connection.getPool()).oldestDue(DUE_READ_TIMEOUT_MS);
  const due = Object.keys(oldest).filter((q) => oldest[q] > 0).sort();
  const problems: string[] = [];
  const hints: string[] = [];
  const unserved = instances.length === 0 ? due : unservedQueues(due, instances);
  if (unserved.length > 0) {
    const waits = unserved.map((q) => `${q} (oldest due ${formatDuration(Math.round(oldest[q]))} ago)`).join(', ');
    problems.push(`due jobs and no live instance serving ${waits}${instances.length === 0 ? '; no instance has registered' : ''}`);
    hints.push('start an instance whose app has a @JobHandler for the queue (with workers enabled); see `pg-queue instances`');
  }
  const stalled = stalledInstances(due, instances);
  if (stalled.length > 0) {
    problems.push(`alive but not claiming: ${stalled.map((s) => `${s.id} has not claimed ${s.queue} for ${formatDuration(s.sinceClaimMs)} (bound ${formatDuration(s.stalledAfterMs)})`).join(', ')}`);
    hints.push('its claim loop is wedged (a lock on the claim\'s path? see pg_stat_activity for its `nestjs-pg-queue leases` sessions); its readiness probe fails too; restart it if it does not recover');
  }
  if (problems.length === 0) return { check: 'progress', state: 'ok', detail: due.length === 0 ? 'no due jobs waiting' : `every queue with due jobs is served and claimed (${due.length} queue(s))` };
  return { check: 'progress', state: 'warn', detail: problems.join('; '), hint: hints.join('; ') };
}
