/**
 * Runs the statements that lock this process's in-flight rows, outcome batches and heartbeats, one at a
 * time. Both update the same rows in whatever order their plans visit them; side by side, a heartbeat and
 * a completion batch deadlocked at concurrency 50 (PostgreSQL aborts one after deadlock_timeout, 1 s, and
 * the batch is retried). A heartbeat runs every few seconds, so the wait it adds to a batch is rare and short.
 * Only the statement runs in the lane: a backoff sleep after a failure is taken outside it.
 */
export class RowLockLane {
  private tail: Promise<unknown> = Promise.resolve();

  run<T>(statement: () => Promise<T>): Promise<T> {
    const result = this.tail.then(statement);
    this.tail = result.catch(() => undefined);
    return result;
  }
}
