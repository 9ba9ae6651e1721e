#!/usr/bin/env bash
# docs/testing.md, as a user follows it: on the project docs/quick-start.md builds from an empty folder, every
# command and file of the page (.ci/doc-steps.mjs), once with Jest and once with Vitest, the library packed as
# npm would publish it and the packages at the versions this repository tests with. The page's test command runs
# on the harness's embedded PostgreSQL (a database per runner, in place of the page's DATABASE_URL) and must
# pass. Needs `npm run build` first (the harness's dist starts the server). See .ci/check-testing-guide.mjs.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

npm pack -w packages/pg-queue --pack-destination "$work" --silent >/dev/null
tarball=$(ls "$work"/nestjs-pg-queue-*.tgz)
node .ci/check-testing-guide.mjs "$tarball" "$work"
