import type { Adapter, SystemId } from './types.js';

/** Imports only the library under test, so a child process carries no other library's code or memory. */
export async function loadAdapter(system: SystemId): Promise<Adapter> {
  switch (system) {
    case 'pg-queue':
    case 'pg-queue-base': // run from the baseline checkout's own dist, where it is its 'pg-queue'
    case 'pg-queue-defaults': // the same adapter; the host asks it for the library's default settings
      return (await import('./pg-queue.js')).pgQueueAdapter;
    case 'pg-boss':
      return (await import('./pg-boss.js')).pgBossAdapter;
    case 'graphile-worker':
      return (await import('./graphile-worker.js')).graphileWorkerAdapter;
    case 'bullmq':
      return (await import('./bullmq.js')).bullmqAdapter;
    case 'plain-sql':
      return (await import('./plain-sql.js')).plainSqlAdapter;
  }
}
