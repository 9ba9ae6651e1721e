/** How an attempt ended: `error` set (anything the handler threw or rejected with), or the value it returned. */
export type AttemptEnd<J> = (job: J, error: unknown, result?: unknown) => void;

/**
 * Calls the handler (with one job, or a batch handler's call) and reports how it ended, once, always from a later microtask (never from inside this
 * call, so the caller is never re-entered while it starts jobs). Whatever the handler does cannot escape:
 * a synchronous throw, a rejection, a returned thenable whose `then` is a throwing getter or throws when
 * called, or calls both callbacks (Promise.resolve adopts it: the first answer wins, a throw is a rejection).
 * A plain promise is not wrapped again (Promise.resolve returns it as it is), so an async handler costs no
 * extra allocation. A rejection with nothing (`reject()`, `throw undefined`) is reported as an Error that says so.
 */
export function runAttempt<J>(handle: (job: J) => unknown, job: J, end: AttemptEnd<J>): void {
  let result: unknown;
  let then: unknown;
  try {
    result = handle(job);
    then = (result as { then?: unknown } | null | undefined)?.then;
  } catch (error) {
    queueMicrotask(() => end(job, error ?? new Error(`handler threw ${String(error)}`)));
    return;
  }
  if (typeof then !== 'function') {
    queueMicrotask(() => end(job, undefined, result));
    return;
  }
  try {
    // The prototype's then, not the object's own: a promise may carry a `then` property of its own.
    Promise.prototype.then.call(
      Promise.resolve(result),
      (value: unknown) => end(job, undefined, value),
      (error: unknown) => end(job, error ?? new Error(`handler rejected with ${String(error)}`)),
    );
  } catch (error) {
    // A promise whose `constructor` getter throws (read by Promise.resolve and then).
    queueMicrotask(() => end(job, error ?? new Error('handler returned a promise that cannot be awaited')));
  }
}
