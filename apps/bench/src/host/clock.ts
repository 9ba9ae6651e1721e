/**
 * Epoch milliseconds with sub-millisecond precision, comparable across processes on one machine:
 * performance.timeOrigin is each process's start as an epoch time, performance.now() is monotonic.
 */
export function nowMs(): number {
  return performance.timeOrigin + performance.now();
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
