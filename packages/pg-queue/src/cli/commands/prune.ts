import type { Command } from 'commander';
import { Pruner } from '../../maintenance/pruner.js';
import { parseDuration, parseInteger } from '../duration.js';
import { count, note, print } from '../output.js';
import type { Run } from '../run.js';

interface PruneOptions {
  completedRetention: number;
  failedRetention: number | 'never';
  batchSize: number;
}

const DAY_MS = 86_400_000;
const silent = { log: () => undefined, error: () => undefined, warn: () => undefined };

export function registerPrune(program: Command, run: Run): void {
  const failedRetention = parseDuration('--failed-retention');
  program
    .command('prune')
    .description("one pass of the module's pruner: delete finished jobs past retention (and ended uniqueForMs windows), in batches")
    .option('--completed-retention <duration>', 'completed jobs older than this (default 1d, as the module)', parseDuration('--completed-retention'), DAY_MS)
    .option('--failed-retention <duration>', "failed and cancelled jobs older than this, or 'never' (default 7d, as the module)", (v: string) => (v === 'never' ? 'never' : failedRetention(v)), 7 * DAY_MS)
    .option('--batch-size <n>', 'rows per DELETE statement', parseInteger('--batch-size', 1, 50_000), 5_000)
    .action(
      run(async (connection, _args, options: PruneOptions) => {
        const pruner = new Pruner(
          connection.jobStore(),
          {
            completedRetentionMs: options.completedRetention,
            failedRetentionMs: options.failedRetention === 'never' ? null : options.failedRetention,
            batchSize: options.batchSize,
            maxBatchesPerPass: 100,
          },
          silent,
        );
        const result = await pruner.runOnce();
        if (!result.ran) note('another instance holds the pruner lock (it is pruning right now): this pass stopped there');
        print(`deleted ${count(result.completed)} completed and ${count(result.failed)} failed/cancelled job(s) past retention`);
      }),
    );
}
