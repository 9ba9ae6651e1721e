import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase } from '@internal/pg-harness';

// Nest queues are known for keeping Jest from exiting (nestjs/bull #1772, #2168). A Jest of its own, in a
// child process with --detectOpenHandles, runs an app's test written with the testing kit
// (fixtures/open-handles/app.fixture.ts): it must pass, report no open handle and exit by itself.

const root = fileURLToPath(new URL('../../..', import.meta.url));
const jestBin = join(root, 'node_modules/jest/bin/jest.js');
const config = 'packages/pg-queue/test/fixtures/open-handles/jest.config.mjs';

interface ChildRun {
  code: number | null;
  output: string;
  ms: number;
  killed: boolean;
}

/** Runs the fixture project; kills it once it reports an open handle, or after `limitMs`. */
function runFixture(url: string, env: Record<string, string>, limitMs: number): Promise<ChildRun> {
  const started = Date.now();
  const child = spawn(process.execPath, [jestBin, '--config', config, '--detectOpenHandles', '--ci', '--colors=false'], {
    cwd: root,
    // FORCE_COLOR=0: npm sets FORCE_COLOR when `npm test` runs in a terminal, and it overrides --colors=false
    // (a coloured "Tests:" line matches nothing below).
    env: { ...process.env, NODE_OPTIONS: '--experimental-vm-modules --no-warnings', FORCE_COLOR: '0', PG_QUEUE_FIXTURE_URL: url, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  let killed = false;
  const kill = () => {
    killed = true;
    child.kill('SIGKILL');
  };
  const limit = setTimeout(kill, limitMs);
  const collect = (chunk: Buffer) => {
    output += chunk.toString();
    if (/open handles? potentially keeping Jest from exiting/.test(output)) setTimeout(kill, 500); // the report is complete by then
  };
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);
  return new Promise((resolve) =>
    child.on('exit', (code) => {
      clearTimeout(limit);
      resolve({ code, output, ms: Date.now() - started, killed });
    }),
  );
}

describe('Jest exits on its own with the testing kit', () => {
  let url: string;
  beforeAll(async () => {
    url = await createTestDatabase('jest-exits');
  });

  it('an app test in manual and inline modes: passes, no open handle reported, the process exits by itself', async () => {
    const run = await runFixture(url, {}, 60_000);
    expect(run.output).toMatch(/Tests:\s+2 passed, 2 total/);
    expect(run.output).not.toMatch(/open handle/i);
    expect(run.output).not.toMatch(/did not exit/);
    expect(run.killed).toBe(false);
    expect(run.code).toBe(0);
    // Jest's own start-up (swc, Nest) is most of it; a kept-open handle would hold the process forever.
    expect(run.ms).toBeLessThan(30_000);
  }, 70_000);

  it('the check sees a handle left open (the fixture leaks a timer on request)', async () => {
    const run = await runFixture(url, { PG_QUEUE_FIXTURE_LEAK: '1' }, 60_000);
    expect(run.output).toMatch(/Tests:\s+2 passed, 2 total/);
    expect(run.output).toMatch(/detected the following 1 open handle/);
    expect(run.output).toContain('app.fixture.ts');
    expect(run.killed).toBe(true);
  }, 70_000);
});
