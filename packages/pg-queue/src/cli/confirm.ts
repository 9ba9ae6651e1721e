import { createInterface } from 'node:readline/promises';
import { NOT_CONFIRMED_NO_TTY } from './cli.messages.js';
import { CliError, UsageError } from './errors.js';
import { note } from './output.js';
import { terminalLine } from '../utils/terminal-text.js';

/**
 * Asks on the terminal before a command that changes or deletes data; refuses (bad usage, exit 2) when stdin is
 * not one: a script must say --yes. `summary` says what would happen ("delete 310 completed jobs ...").
 */
export async function confirm(summary: string, options: { dryRun?: boolean } = {}): Promise<void> {
  if (!process.stdin.isTTY) throw new UsageError(NOT_CONFIRMED_NO_TTY(summary, options.dryRun ?? true));
  const prompt = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = await prompt.question(terminalLine(`${summary[0].toUpperCase()}${summary.slice(1)}? [y/N] `));
    if (!/^y(es)?$/i.test(answer.trim())) throw new CliError('not confirmed: nothing changed');
  } finally {
    prompt.close();
  }
  note('');
}
