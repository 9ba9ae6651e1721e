#!/usr/bin/env bash
# docs/quick-start.md, as a user would follow it: the library packed as npm would publish it, installed with the
# quick start's own `npm install` line into an empty ES-module project, its main.ts block compiled with tsc and
# run against a real PostgreSQL (DATABASE_URL, else the harness's embedded server). Passes when the handler
# prints its line, the job's row is `completed`, and SIGTERM drains and exits 0 (enableShutdownHooks).
# Needs `npm run build` first (the harness's dist starts the server).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

npm pack -w packages/pg-queue --pack-destination "$work" --silent >/dev/null
tarball=$(ls "$work"/nestjs-pg-queue-*.tgz)
app="$work/app"
mkdir "$app"

# The page's install line, with the packed library in place of the registry's, and its main.ts block.
node --input-type=module - "$root/docs/quick-start.md" "$app" <<'EOF'
import { readFileSync, writeFileSync } from 'node:fs';
const [page, app] = process.argv.slice(2);
const text = readFileSync(page, 'utf8');
const block = (lang, first) => {
  const m = [...text.matchAll(new RegExp('```' + lang + '\\n([\\s\\S]*?)```', 'g'))].map((b) => b[1]).find((b) => b.startsWith(first));
  if (!m) throw new Error(`docs/quick-start.md: no ${lang} block starting with ${first}`);
  return m;
};
const install = block('bash', 'npm install nestjs-pg-queue').trim().split('\n')[0];
writeFileSync(`${app}/install.txt`, install.replace(/^npm install nestjs-pg-queue /, ''));
writeFileSync(`${app}/main.ts`, block('ts', '// main.ts'));
EOF
cat >"$app/package.json" <<'EOF'
{ "name": "quick-start", "private": true, "type": "module" }
EOF
# What the page asks of tsconfig.json: ES module output, decorators with metadata.
cat >"$app/tsconfig.json" <<'EOF'
{
  "compilerOptions": {
    "target": "ES2022",
    "module": "nodenext",
    "moduleResolution": "nodenext",
    "strict": true,
    "experimentalDecorators": true,
    "emitDecoratorMetadata": true,
    "outDir": "dist",
    "types": ["node"]
  },
  "files": ["main.ts"]
}
EOF
ts=$(node -p 'require("typescript/package.json").version')
# Peers at the versions this repository tests with (the root package.json's), so a new major on npm does not
# break the check before the library supports it.
peers=$(node -p '
  const deps = require("./package.json").dependencies;
  require("fs").readFileSync(process.argv[1], "utf8").trim().split(/\s+/).map((n) => deps[n] ? `${n}@${deps[n]}` : n).join(" ")
' "$app/install.txt")
(cd "$app" && npm install --prefer-offline --no-audit --no-fund --loglevel=error "$tarball" $peers "typescript@$ts" "@types/node@20" >/dev/null)
(cd "$app" && npx --no-install tsc -p .)

# Run it: a database of its own, the app as a child process, the job's row read back.
node --input-type=module - "$app" <<'EOF'
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { createDatabase, startPostgres } from '@internal/pg-harness';
const app = process.argv[2];
const pg = createRequire(`${app}/package.json`)('pg');

const server = await startPostgres({ containers: false });
let child;
try {
  const url = await createDatabase(server.url, `quick_start_${process.pid}`);
  child = spawn(process.execPath, ['dist/main.js'], { cwd: app, env: { ...process.env, DATABASE_URL: url }, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no "hello, Ada" within 60 s; output:\n${out}`)), 60_000);
    child.stdout.on('data', (d) => {
      out += d;
      process.stdout.write(d);
      if (/hello, Ada \(job \d+, attempt 1\)/.test(out)) { clearTimeout(timer); resolve(); }
    });
    exited.then(({ code }) => reject(new Error(`the app exited (${code}) before the job ran; output:\n${out}`)));
  });
  // The outcome is written in a batch just after the handler returns: poll the row briefly.
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  let status;
  for (let i = 0; i < 100 && status !== 'completed'; i++) {
    ({ rows: [{ status } = {}] } = await client.query(`SELECT status FROM background_jobs WHERE queue_name = 'greetings'`));
    if (status !== 'completed') await new Promise((r) => setTimeout(r, 100));
  }
  await client.end();
  if (status !== 'completed') throw new Error(`the job's status is ${status}, not completed`);
  child.kill('SIGTERM');
  const { code, signal } = await Promise.race([exited, new Promise((r) => setTimeout(() => r({ code: 'timeout' }), 30_000))]);
  // Nest's shutdown hooks re-raise the signal after app.close(): an exit by SIGTERM, after the drain, is the success.
  if (!(code === 0 || signal === 'SIGTERM')) throw new Error(`after SIGTERM the app ended with ${code ?? signal}`);
  console.log('quick start check: the job completed and the app shut down on SIGTERM');
} finally {
  if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await server.stop();
}
EOF
