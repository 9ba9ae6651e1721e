import type { Command } from 'commander';
import { print } from '../output.js';
import type { Run } from '../run.js';
import { queueName } from './jobs.js';

export function registerQueues(program: Command, run: Run): void {
  program
    .command('pause')
    .description('stop every instance from claiming jobs of the queue (running jobs finish; enqueueing still works)')
    .argument('<queue>', 'the queue')
    .action(
      run(async (connection, [queue]) => {
        await connection.jobStore().pauseQueue(queueName(queue));
        print(`paused ${queue}`);
      }),
    );
  program
    .command('resume')
    .description('let the queue run again (idle workers wake at once)')
    .argument('<queue>', 'the queue')
    .action(
      run(async (connection, [queue]) => {
        await connection.jobStore().resumeQueue(queueName(queue));
        print(`resumed ${queue}`);
      }),
    );
}
