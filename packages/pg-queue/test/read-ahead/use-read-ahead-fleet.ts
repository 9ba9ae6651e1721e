import { afterAll, afterEach, beforeAll } from '@jest/globals';
import { symlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildWorker, type WorkerBuild } from '../faults/support/build-worker.js';
import { ReadAheadFleet } from './read-ahead-fleet.js';

/** What a spec of read-ahead worker processes uses: the fleet, and the `pg-queue` binary of the same build. */
export interface ReadAheadFleetContext {
  fleet: ReadAheadFleet;
  /** The `pg-queue` binary of the worker build (swc, like the workers): no tsc -b of dist/ racing cli.spec.ts's. */
  cli: string;
}

/**
 * The set-up of a spec that forks read-ahead-worker.ts processes: beforeAll builds the worker (and its CLI) and warms
 * two processes; after each test every process is killed and two more warmed; afterAll removes the build. The
 * returned object is filled in once beforeAll has run.
 */
export function useReadAheadFleet(): ReadAheadFleetContext {
  const ctx = {} as ReadAheadFleetContext;
  let build: WorkerBuild | undefined;
  beforeAll(async () => {
    build = await buildWorker([fileURLToPath(new URL('./read-ahead-worker.ts', import.meta.url))]);
    const outDir = join(dirname(build.script), '..', '..');
    ctx.cli = join(outDir, 'src', 'cli', 'main.js');
    // The package's own dependencies that npm did not hoist (commander) resolve from the build as from the package.
    await symlink(fileURLToPath(new URL('../../node_modules', import.meta.url)), join(outDir, 'node_modules'), 'dir');
    ctx.fleet = new ReadAheadFleet(build.script);
    ctx.fleet.warm(2);
  }, 60_000);
  afterEach(async () => {
    await ctx.fleet.killAll();
    ctx.fleet.warm(2);
  });
  afterAll(async () => {
    await ctx.fleet?.killAll();
    await build?.remove();
  });
  return ctx;
}
