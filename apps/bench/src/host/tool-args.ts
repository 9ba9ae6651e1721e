/**
 * The one-off tools' options (plans/get-jobs-plans, plans/claim-cost, history/history-bench): `--name value` pairs
 * read from the command line, each with its default. The benchmark itself parses its options in cli.ts.
 */
export function toolArg(name: string, fallback: string): string {
  const args = process.argv.slice(2);
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
}

/** Whether a flag without a value (`--plans`) is on the command line. */
export function toolFlag(name: string): boolean {
  return process.argv.slice(2).includes(name);
}
