#!/usr/bin/env bash
# Packs the library as npm would publish it, checks what the tarball holds, installs it into an empty
# project beside its peer dependencies and compiles a small consumer with skipLibCheck false (a type the
# declarations import without a declared dependency fails there with TS7016), then imports it with Node and
# runs its bin (`npx pg-queue --help`). First, that `npm publish` would publish it as it is (a dry run).
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Ready to publish: the manifest says where the source is (repository, which npm's provenance checks the build
# against), asks for provenance and public access, and lists its files; npm's own dry run warns about nothing but the
# missing login (a "npm pkg fix" correction would publish a package.json other than ours: a bin of "./x.js" once).
node -e '
  const p = require("./packages/pg-queue/package.json");
  const problems = [
    !/^git\+https:\/\/github\.com\/[^/]+\/[^/]+\.git$/.test(p.repository?.url ?? "") && "repository.url (git+https://github.com/<owner>/<repo>.git)",
    p.repository?.directory !== "packages/pg-queue" && "repository.directory (packages/pg-queue)",
    p.publishConfig?.provenance !== true && "publishConfig.provenance: true",
    p.publishConfig?.access !== "public" && "publishConfig.access: public",
    !Array.isArray(p.files) && "files",
  ].filter(Boolean);
  if (problems.length) { console.error("packages/pg-queue/package.json lacks", problems.join(", ")); process.exit(1); }
'
dry_run=$(npm publish --dry-run -w packages/pg-queue 2>&1)
if grep -E '^npm (warn|error|ERR)' <<<"$dry_run" | grep -v 'requires you to be logged in' >&2; then
  echo "npm publish --dry-run warns (above): fix packages/pg-queue/package.json (npm pkg fix -w packages/pg-queue shows what npm would change)" >&2
  exit 1
fi
grep -q '^npm notice Publishing to .* with tag latest and public access (dry-run)' <<<"$dry_run" || { echo "npm publish --dry-run did not get to publishing:" >&2; echo "$dry_run" | tail -20 >&2; exit 1; }

npm pack -w packages/pg-queue --pack-destination "$work" --silent >/dev/null
tarball=$(ls "$work"/nestjs-pg-queue-*.tgz)
listing=$(tar -tzf "$tarball")
for f in package/LICENSE package/README.md package/package.json package/dist/index.js package/dist/index.d.ts package/src/index.ts package/dist/cli/main.js; do
  grep -qx "$f" <<<"$listing" || { echo "the package lacks $f" >&2; exit 1; }
done
if grep -E 'tsbuildinfo|/test/|\.spec\.' <<<"$listing" >&2; then echo "the package holds build or test files (above)" >&2; exit 1; fi
# Every source map must point at a file the package ships.
tar -xzf "$tarball" -C "$work"
node -e '
  const fs = require("fs"), path = require("path");
  const walk = (d) => fs.readdirSync(d, { withFileTypes: true }).flatMap((e) => e.isDirectory() ? walk(path.join(d, e.name)) : [path.join(d, e.name)]);
  const missing = walk(process.argv[1]).filter((f) => f.endsWith(".map")).flatMap((f) =>
    JSON.parse(fs.readFileSync(f, "utf8")).sources.map((s) => path.resolve(path.dirname(f), s)).filter((s) => !fs.existsSync(s)));
  if (missing.length) { console.error("source maps point at files the package lacks:", missing.slice(0, 3)); process.exit(1); }
' "$work/package/dist"

consumer="$work/consumer"
mkdir "$consumer"
cp .ci/package-consumer/consumer.ts .ci/package-consumer/tsconfig.json "$consumer/"
echo '{ "name": "consumer", "private": true, "type": "module" }' >"$consumer/package.json"
peers=$(node -p 'Object.entries(require("./packages/pg-queue/package.json").peerDependencies).map(([n, v]) => `${n}@${v}`).join(" ")')
ts=$(node -p 'require("typescript/package.json").version')
(cd "$consumer" && npm install --prefer-offline --no-audit --no-fund --loglevel=error "$tarball" $peers "typescript@$ts" "@types/node@20" >/dev/null)
(cd "$consumer" && npx --no-install tsc -p .)
(cd "$consumer" && node --input-type=module -e 'import("nestjs-pg-queue").then((m) => { if (!m.PgQueueModule || !m.QueueService) process.exit(1); })')
# The package's bin, as a user runs it: npx finds it in the installed package, its dependencies resolve.
help=$(cd "$consumer" && npx --no-install pg-queue --help)
for command in migrate stats jobs enqueue pause resume prune doctor; do
  grep -q "^  $command" <<<"$help" || { echo "npx pg-queue --help lacks the $command command:" >&2; echo "$help" >&2; exit 1; }
done
echo "package check: $(basename "$tarball") ($(wc -l <<<"$listing") files) installs, type-checks with skipLibCheck false and imports; npx pg-queue --help works"
