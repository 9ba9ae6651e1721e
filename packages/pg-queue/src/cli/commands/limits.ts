import type { Command } from 'commander';
import { PgQueueError } from '../../errors/pg-queue.error.js';
import { checkLimitsChange, limitsInForce, type LimitInForce, type QueueLimits, type QueueLimitsChange } from '../../limits/queue-limits.js';
import { UsageError } from '../errors.js';
import { print, printJson } from '../output.js';
import type { Run } from '../run.js';
import { queueName } from './jobs.js';

interface LimitsCliOptions {
  concurrency?: string;
  global?: string;
  rate?: string;
  perKey?: string;
  reset?: boolean;
  json?: boolean;
}

export function registerLimits(program: Command, run: Run): void {
  program
    .command('limits')
    .description("show or change a queue's limits at runtime (every process applies a change within a second; README: Limits changed at runtime)")
    .argument('<queue>', 'the queue')
    .option('--concurrency <n>', "jobs at once in each process, or 'default' for the decorator's")
    .option('--global <n>', "jobs at once in all processes (globalConcurrency), 'none' or 'default'")
    .option('--rate <max/intervalMs>', "starts per sliding window, e.g. 100/1000, 'none' or 'default'")
    .option('--per-key <n>', "jobs of one concurrency key at once (concurrencyPerKey), 'none' or 'default'")
    .option('--reset', "clear every override: the decorator's limits apply again")
    .option('--json', 'print the limits as JSON')
    .action(
      run<LimitsCliOptions>(async (connection, [queue], options) => {
        const store = connection.jobStore();
        const change = changeOf(options);
        if (change !== undefined) {
          let checked;
          try {
            checked = checkLimitsChange(queueName(queue), change);
          } catch (error) {
            throw error instanceof PgQueueError ? new UsageError(error.message) : error;
          }
          await store.setQueueLimits(queue, checked.set, checked.clear);
        }
        const [row] = await store.queueSettings([queueName(queue)]);
        // The decorators' values live in the app's code, not the database: this command names them "decorator".
        const limits = limitsInForce(queue, row?.limits ?? null, undefined, { blockedMs: row?.blockedMs ?? 0, keyBlockedMs: row?.keyBlockedMs ?? 0 });
        if (options.json) printJson(limits);
        else printLimits(limits);
      }),
    );
}

/** The change the options ask for; undefined when they ask none (the command then only shows the limits). */
function changeOf(options: LimitsCliOptions): QueueLimitsChange | undefined {
  if (options.reset) {
    if (options.concurrency ?? options.global ?? options.rate ?? options.perKey) throw new UsageError('--reset clears every override: give it alone');
    return { concurrency: null, globalConcurrency: null, rateLimit: null, concurrencyPerKey: null };
  }
  const change: QueueLimitsChange = {};
  if (options.concurrency !== undefined) change.concurrency = options.concurrency === 'default' ? null : integer('--concurrency', options.concurrency);
  if (options.global !== undefined) change.globalConcurrency = word(options.global) ?? integer('--global', options.global);
  if (options.perKey !== undefined) change.concurrencyPerKey = word(options.perKey) ?? integer('--per-key', options.perKey);
  if (options.rate !== undefined) change.rateLimit = word(options.rate) ?? rate(options.rate);
  return Object.keys(change).length > 0 ? change : undefined;
}

function word(value: string): 'none' | null | undefined {
  if (value === 'none') return 'none';
  if (value === 'default') return null;
  return undefined;
}

function integer(flag: string, value: string): number {
  if (!/^\d+$/.test(value)) throw new UsageError(`${flag} expects an integer, 'none' or 'default'; got ${JSON.stringify(value)}`);
  return Number(value);
}

function rate(value: string): { max: number; intervalMs: number } {
  const m = /^(\d+)\/(\d+)$/.exec(value);
  if (!m) throw new UsageError(`--rate expects max/intervalMs (e.g. 100/1000), 'none' or 'default'; got ${JSON.stringify(value)}`);
  return { max: Number(m[1]), intervalMs: Number(m[2]) };
}

function printLimits(l: QueueLimits): void {
  const show = <T>(name: string, limit: LimitInForce<T>, text: (v: T) => string) =>
    print(`${name.padEnd(18)} ${limit.source === 'decorator' ? "the decorator's" : limit.value === 'none' ? 'none (set here)' : `${text(limit.value as T)} (set here)`}`);
  print(`queue ${l.queue}`);
  show('concurrency', l.concurrency, String);
  show('globalConcurrency', l.globalConcurrency, String);
  show('rateLimit', l.rateLimit, (r) => `${r.max}/${r.intervalMs} ms`);
  show('concurrencyPerKey', l.concurrencyPerKey, String);
  if (l.blockedForMs > 0) print(`blocked by a partner's 429 for ${l.blockedForMs} ms more`);
  if (l.keysBlockedForMs > 0) print(`a concurrency key blocked by a partner's 429 for up to ${l.keysBlockedForMs} ms more`);
}
