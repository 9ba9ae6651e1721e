// The queue page's fair share section (issue 42, part 2): the weights a fair queue's keys have. Reads only: a change
// goes through QueueService.setFairnessWeights.
import type { QueueDatabase } from '../databases/queue-database.js';
import type { QueueDatabases } from '../databases/queue-databases.js';
import type { DashboardQueries } from '../store/dashboard.store.js';
import type { QueueWeights } from './views/queue-weights.view.js';

/** The `fairness` option of the queue's handler in this process (undefined: none runs here, or it is not fair). */
export function fairnessOption(databases: QueueDatabases, database: string, queue: string): QueueWeights['option'] {
  const fairness = (databases as QueueDatabases<QueueDatabase>).get(database).handlers.get(queue)?.options.fairness;
  return fairness && { defaultWeight: fairness.defaultWeight, weights: fairness.weights };
}

/**
 * A fair queue's weights for its page; null when the queue is not fair here: no fairness option in this process, and
 * no fair claim or stored weight seen in the database (a queue served only by other processes counts once a fair
 * claim has run for it).
 */
export async function queueWeights(q: DashboardQueries, name: string, option: QueueWeights['option']): Promise<QueueWeights | null> {
  if (!option && !(await q.fairness.seen(name))) return null;
  return { option, ...(await q.fairness.weights(name)) };
}
