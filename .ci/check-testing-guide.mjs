// docs/testing.md followed literally (.ci/check-testing-guide.sh), twice: with Jest, and with Vitest. Each run
// starts from the project docs/quick-start.md builds from an empty folder (its commands and files; not its
// long-running PostgreSQL and app), copied, then follows every step of docs/testing.md but the other runner's
// section, and runs the page's test command on a database of its own of the harness's embedded PostgreSQL
// (the page's DATABASE_URL replaced). Arguments: the packed library (.tgz) and an empty folder.
import { cpSync, mkdirSync } from 'node:fs';
import { basename, join } from 'node:path';
import { createDatabase, startPostgres } from '@internal/pg-harness';
import { followSteps, readSteps } from './doc-steps.mjs';

const [tarball, work] = process.argv.slice(2);
const runners = { Jest: 'With Jest', Vitest: 'With Vitest' };
// Packages the page installs that the root package.json does not hold (it uses Jest), at the major tested here.
const pins = { 'unplugin-swc': '2' };

const started = Date.now();
const server = await startPostgres({ containers: false });
try {
  mkdirSync(join(work, 'quick-start'));
  const project = await followSteps(readSteps('docs/quick-start.md', { skipSections: ['From `nest new`'] }), {
    cwd: join(work, 'quick-start'),
    tarball,
    pins,
    // The page's pack command (a checkout's npm ci and npm pack, which check-quick-start.sh runs) gives this tarball.
    rewrite: (text) => text.replace(/^.*npm pack -w packages\/pg-queue.*$/m, `cp '${tarball}' .`),
    background: () => {}, // the quick start's PostgreSQL and app: the tests get the harness's server
  });
  console.log(`-- the quick start's project is ready (${Math.round((Date.now() - started) / 1000)} s)`);

  const passed = [];
  for (const [runner, section] of Object.entries(runners)) {
    const t0 = Date.now();
    const others = Object.values(runners).filter((s) => s !== section);
    const steps = readSteps('docs/testing.md', { skipSections: others });
    if (!steps.some((s) => s.section === section)) throw new Error(`docs/testing.md has no steps under "## ${section}"`);
    const dir = join(work, runner.toLowerCase(), basename(project));
    cpSync(project, dir, { recursive: true, verbatimSymlinks: true });
    const url = await createDatabase(server.url, `testing_guide_${runner.toLowerCase()}_${process.pid}`);
    console.log(`== docs/testing.md with ${runner}, on ${url.replace(/:[^:@/]*@/, ':***@')}`);
    await followSteps(steps, {
      cwd: dir,
      tarball,
      pins,
      rewrite: (text) => text.replace(/DATABASE_URL=\S+/g, `DATABASE_URL=${url}`),
    });
    passed.push(`${runner} ${Math.round((Date.now() - t0) / 1000)} s`);
  }
  console.log(`testing guide check: docs/testing.md followed on the quick start's project, its tests pass with ${passed.join(' and ')} (${Math.round((Date.now() - started) / 1000)} s in all)`);
} finally {
  await server.stop();
}
