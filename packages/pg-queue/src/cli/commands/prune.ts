import type { Command } from 'commander';
import { Pruner } from '../../maintenance/pruner.js';
import { confirm } from '../confirm.js';
import { formatDuration, parseDuration, parseInteger } from '../duration.js';
import { count, note, print } from '../output.js';
import type { Run } from '../run.js';

interface PruneOptions {
  completedRetention: number;
  failedRetention: number | 'never';
  batchSize: number;
  dryRun?: boolean;
  yes?: boolean;
}

/** Rows counted per kind for the question and --dry-run (a count, not a scan of millions). */
const COUNT_UP_TO = 1_000_000;

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
    .option('--dry-run', 'count what would be deleted, delete nothing')
    .option('-y, --yes', 'do not ask for confirmation (needed when stdin is not a terminal)')
    .action(
      run(async (connection, _args, options: PruneOptions) => {
        const failedMs = options.failedRetention === 'never' ? null : options.failedRetention;
        const counted = await connection.adminStore().countPrunable(options.completedRetention, failedMs, COUNT_UP_TO);
        const n = (k: number) => (k >= COUNT_UP_TO ? `at least ${count(k)}` : count(k));
        // Partitioned history's partitions past retention, each dropped whole (README: "Long retention: partitioned history").
        const expired = (await connection.jobStore().history.partitions()).filter((p) => {
          const retention = p.kind === 'completed' ? options.completedRetention : failedMs;
          return retention !== null && p.upper.getTime() <= p.now.getTime() - retention;
        });
        const summary =
          `delete ${n(counted.completed)} completed job(s) finished over ${formatDuration(options.completedRetention)} ago` +
          (failedMs === null ? ' (failed and cancelled jobs are kept)' : ` and ${n(counted.failed)} failed/cancelled job(s) finished over ${formatDuration(failedMs)} ago`) +
          (expired.length > 0 ? `, and drop ${expired.length} history partition(s) past retention (${expired.map((p) => p.name).join(', ')})` : '');
        if (options.dryRun) {
          print(`would ${summary} (dry run: nothing deleted)`);
          return;
        }
        if (!options.yes) await confirm(summary);
        const pruner = new Pruner(
          connection.jobStore(),
          {
            completedRetentionMs: options.completedRetention,
            failedRetentionMs: options.failedRetention === 'never' ? null : options.failedRetention,
            batchSize: options.batchSize,
            maxBatchesPerPass: 100,
          },
          silent,
          connection.jobStore().history,
        );
        const result = await pruner.runOnce();
        if (!result.ran) note('another instance holds the pruner lock (it is pruning right now): this pass stopped there');
        print(`deleted ${count(result.completed)} completed and ${count(result.failed)} failed/cancelled job(s) past retention` + (result.partitions > 0 ? `; dropped ${result.partitions} history partition(s)` : ''));
      }),
    );
}
