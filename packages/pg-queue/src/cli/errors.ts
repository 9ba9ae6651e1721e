/** Bad usage (exit code 2): a missing argument, an option out of range, a refused confirmation. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** A failure the command reports (exit code 1) in one line. */
export class CliError extends Error {
  override name = 'CliError';
}

export const EXIT = { ok: 0, error: 1, usage: 2 } as const;
