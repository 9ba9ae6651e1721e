import type { NewJobRow } from '../store/job-store.types.js';
import type { Wake } from '../store/shared.sql.js';
import type { KeyedOutcome } from '../store/unique-rows.js';
import type { CallerTransaction } from '../transactions/caller-transaction.js';
import type { WakeSender } from './wake-sender.js';

/**
 * Runs an enqueue's insert with the wake-up the wake sender chooses for it (see WakeSender.begin): the
 * trigger's, or deferred, when the sender wakes the queues of the rows inserted or replaced (a duplicate
 * changed nothing) once the insert committed. An insert in the caller's transaction (manager) always keeps
 * the trigger's: only the caller sees its commit.
 */
export async function woken<R>(wakes: WakeSender | undefined, tx: CallerTransaction | undefined, rows: readonly NewJobRow[], insert: (wake: Wake) => Promise<R>, outcomesOf?: (result: R) => readonly KeyedOutcome[]): Promise<R> {
  if (tx !== undefined || wakes === undefined) return insert('trigger');
  const wake = wakes.begin();
  try {
    const result = await insert(wake);
    if (wake === 'deferred') wakes.wake(wokenQueues(rows, outcomesOf?.(result)));
    return result;
  } finally {
    wakes.end();
  }
}

/** The queues of the rows an insert added or changed (with outcomes: not the duplicates). */
export function wokenQueues(rows: readonly NewJobRow[], outcomes: readonly KeyedOutcome[] | undefined): Set<string> {
  const queues = new Set<string>();
  for (let i = 0; i < rows.length; i++) if (outcomes === undefined || outcomes[i].outcome !== 'duplicate') queues.add(rows[i].queue);
  return queues;
}
