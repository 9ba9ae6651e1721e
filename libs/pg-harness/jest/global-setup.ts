import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';

/**
 * One PostgreSQL server for the whole run (DATABASE_URL, a container, or embedded); each test file makes
 * its own database on it. The URL reaches the test workers through the environment.
 *
 * Jest loads this file through ts-node as CommonJS, which cannot follow the harness's ESM `.js` imports,
 * so it builds the harness (incremental: instant when up to date) and loads the built ESM instead.
 */
export default async function globalSetup(): Promise<void> {
  const root = resolve(__dirname, '../../..');
  const tsc = createRequire(resolve(root, 'package.json')).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '-b', 'libs/pg-harness'], { cwd: root, stdio: 'inherit' });
  const { startPostgres } = (await import('@internal/pg-harness')) as typeof import('../src/index.js');
  let server: Awaited<ReturnType<typeof startPostgres>>;
  try {
    server = await startPostgres({ log: process.env.PG_HARNESS_VERBOSE ? console.log : undefined, notice: console.log });
  } catch (error) {
    // A set-up the harness cannot work around says why and what to do in one line; a stack adds nothing.
    if (error instanceof Error && error.name === 'PostgresSetupError') {
      console.error(`\n[pg-harness] ${error.message}`);
      process.exit(1);
    }
    throw error;
  }
  (globalThis as Record<string, unknown>).__pgHarnessServer = server;
  process.env.PG_QUEUE_TEST_SERVER_URL = server.url;
  const binaries = server.source === 'embedded' && process.env.PG_QUEUE_TEST_PG_BIN ? `, binaries from ${process.env.PG_QUEUE_TEST_PG_BIN}` : '';
  console.log(`\n[pg-harness] PostgreSQL (${server.source}${binaries}) at ${server.url.replace(/:[^:@/]*@/, ':***@')}`);
}
