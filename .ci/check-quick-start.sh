#!/usr/bin/env bash
# docs/quick-start.md, as a user follows it from an empty folder: every command and file is taken from the page
# (.ci/doc-steps.mjs: files are the blocks whose first line names them, commands the ```bash blocks), the library
# packed by the page's own command in a clone of this repository (committed work only) as the page says until it is
# on npm, and the packages at the versions this repository tests with. The page's own PostgreSQL (db.mjs, embedded-postgres) starts on a free port; passes
# when the handler prints its line, the job's row is `completed` with its result, and SIGTERM drains and exits 0
# (enableShutdownHooks). See .ci/check-quick-start.mjs.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# As root, embedded-postgres runs PostgreSQL as the postgres user, who must reach the project (mktemp gives 0700),
# as the page says.
chmod 755 "$work"

npm pack -w packages/pg-queue --pack-destination "$work" --silent >/dev/null
tarball=$(ls "$work"/nestjs-pg-queue-*.tgz)
mkdir "$work/empty" && chmod 755 "$work/empty"
# The page packs the library in a checkout of this repository (until it is on npm): a clone of HEAD.
git clone --quiet --depth 1 "file://$PWD" "$work/checkout"
node .ci/check-quick-start.mjs "$tarball" "$work/empty" "$work/checkout"
# Its "From `nest new`" section, on a project the Nest CLI makes (the CLI and the project's packages from npm).
mkdir "$work/nest-new"
node .ci/check-nest-new.mjs "$tarball" "$work/nest-new"
