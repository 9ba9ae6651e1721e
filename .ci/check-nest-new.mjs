// docs/quick-start.md's "From `nest new`", followed on a project the Nest CLI makes today (.ci/check-quick-start.sh):
// `nest new` as a reader without a terminal runs it (npm, the CLI's defaults: @nestjs/observe set up), the quick
// start's src/greeter.ts, then the section's own steps (its install line, its src/app.module.ts), and the project's
// `npm run build` (nest build) must pass. A section written for another generated project fails here: the CLI's
// main.ts once imported `ObserveInstrument` from app.module.ts, and the page's module had dropped it (TS2305).
// Arguments: the packed library (.tgz) and an empty folder.
import { copyFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { followSteps, readSteps, runCommand } from './doc-steps.mjs';

const [tarball, work] = process.argv.slice(2);
const page = 'docs/quick-start.md';
const section = 'From `nest new`';
// The major the page is written for; the CLI's latest release of it, as `npx @nestjs/cli new` gives a reader.
const NEST_CLI = '12';

const started = Date.now();
const steps = readSteps(page);
const greeter = steps.find((s) => s.kind === 'file' && s.path === 'src/greeter.ts');
const own = steps.filter((s) => s.section === section);
if (!greeter) throw new Error(`${page}: no src/greeter.ts block, which "${section}" adds`);
if (!own.some((s) => s.kind === 'file' && s.path === 'src/app.module.ts')) throw new Error(`${page}: "${section}" has no src/app.module.ts block (its first line naming the file)`);

// --skip-skills: the agent skills are fetched from elsewhere and touch no code the page is about.
await runCommand(`npx --yes @nestjs/cli@${NEST_CLI} new my-app --package-manager npm --skip-git --skip-skills`, {
  cwd: work,
  env: { ...process.env, npm_config_prefer_offline: 'true', npm_config_audit: 'false', npm_config_fund: 'false' },
  where: `${page} (${section}): nest new`,
  timeoutMs: 600_000,
});
const project = join(work, 'my-app');
// The section installs step 2's tarball, packed into the project's folder.
copyFileSync(tarball, join(project, basename(tarball)));
await followSteps([greeter, ...own], { cwd: project, tarball, env: { npm_config_prefer_offline: 'true' } });
await runCommand('npm run build', { cwd: project, where: `${page} (${section}): npm run build in the generated project` });
console.log(`nest new check: "${section}" of ${page} applied to a project of @nestjs/cli@${NEST_CLI}, which builds (${Math.round((Date.now() - started) / 1000)} s)`);
