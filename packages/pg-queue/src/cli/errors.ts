/** Bad usage (exit code 2): a missing argument, an option out of range, a refused confirmation. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** A failure the command reports (exit code 1) in one line. */
export class CliError extends Error {
  override name = 'CliError';
}

export const EXIT = { ok: 0, error: 1, usage: 2 } as const;

/** An error in one line, as the command prints it: pg's SQLSTATE after its message (`... (28P01)`). */
export function describeError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  if (error instanceof CliError || error instanceof UsageError) return error.message;
  // AggregateError (several addresses refused) has an empty message; its first error names the problem.
  const message = error.message || (error instanceof AggregateError && error.errors[0] instanceof Error ? error.errors[0].message : error.name);
  const code = (error as { code?: unknown }).code;
  return `${message.split('\n')[0]}${typeof code === 'string' && !message.includes(code) ? ` (${code})` : ''}`;
}
