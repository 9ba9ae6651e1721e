import type { Command } from 'commander';
import { UsageError } from '../errors.js';
import { checkedWeights } from '../../utils/fairness-weights.js';
import { note, print, printJson, printTable } from '../output.js';
import type { Run } from '../run.js';
import { queueName } from './jobs.js';

/** `key=weight` or `key=default` (removes the stored weight); the key is everything before the last '='. */
function parseWeight(arg: string): [string, number | null] {
  const at = arg.lastIndexOf('=');
  const [key, value] = [arg.slice(0, at), arg.slice(at + 1)];
  if (at <= 0 || value === '') throw new UsageError(`"${arg}" is not key=weight (an integer from 1 to 1000) or key=default`);
  if (value === 'default') return [key, null];
  if (!/^\d+$/.test(value)) throw new UsageError(`"${arg}": the weight must be an integer from 1 to 1000, or "default"`);
  return [key, Number(value)];
}

/** A refused argument as bad usage (exit code 2), its message kept. */
function usage<T>(check: () => T): T {
  try {
    return check();
  } catch (error) {
    throw error instanceof UsageError ? error : new UsageError((error as Error).message);
  }
}

export function registerWeights(program: Command, run: Run): void {
  program
    .command('weights')
    .description("the fair share weights stored for a queue's keys (README: Fair share across keys); with key=weight arguments, stores them (key=default removes one), in every process from the next claim")
    .argument('<queue>', 'the queue')
    .argument('[weights...]', 'key=weight (1 to 1000) or key=default')
    .option('--json', 'as JSON: { key: weight }')
    .action(
      run(async (connection, [queue, ...given], options: { json?: boolean }) => {
        const name = queueName(queue);
        const store = connection.jobStore().fairness;
        if (given.length > 0) {
          const pairs = usage(() => checkedWeights(`pg-queue weights ${name}`, Object.fromEntries(given.map(parseWeight))));
          await store.setWeights(name, pairs);
          note(`stored ${pairs.length} weight${pairs.length === 1 ? '' : 's'} for ${name}`);
        }
        const weights = await store.weights(name);
        if (options.json) return printJson(weights);
        if (Object.keys(weights).length === 0) return print(`no weight stored for ${name}: every key weighs what its fairness option says`);
        printTable(['key', 'weight'], Object.entries(weights).map(([k, w]) => [k, String(w)]));
      }),
    );
}
