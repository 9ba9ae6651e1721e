#!/usr/bin/env bash
# The README's commands as root in a checkout under a private (mode 0700) folder, as in /root: embedded
# PostgreSQL runs as the postgres user, who cannot enter that folder. Clones the repository there (the
# committed tree), hard-links node_modules from this checkout (what npm ci would install; copying is the
# slow part and not what is tested), runs one small test file and starts the demo until it serves.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "private-folder check: skipped (not root; the case is root's)"; exit 0; }
private=$(mktemp -d) # mode 0700
demo_pid=
cleanup() {
  if [ -n "$demo_pid" ] && kill -0 "$demo_pid" 2>/dev/null; then kill -INT "$demo_pid"; wait "$demo_pid" || true; fi
  relocated=$(sed -n 's/.*its data lives in \(.*\) instead.*/\1/p' "$private/demo.log" 2>/dev/null | head -n 1 || true)
  [ -n "$relocated" ] && rm -rf "$(dirname "$relocated")"
  rm -rf "$private"
}
trap cleanup EXIT

git clone -q . "$private/p"
cp -al node_modules "$private/p/node_modules"
# Workspaces keep what they could not hoist (a second version of a package) in their own node_modules.
for dir in packages/* apps/* libs/*; do
  if [ -d "$dir/node_modules" ]; then cp -al "$dir/node_modules" "$private/p/$dir/node_modules"; fi
done
cd "$private/p"
[ "$(stat -c %a "$private")" = 700 ] || { echo "the private folder is not 0700" >&2; exit 1; }

echo "-- npm test, one file, in $private/p (mode 0700 above it)"
npm test -- packages/pg-queue/test/lifecycle.spec.ts

echo "-- the demo, as npm start runs it"
npm run build >"$private/build.log" 2>&1 || { cat "$private/build.log" >&2; echo "the build failed" >&2; exit 1; }
port=$(node -e 'const s = require("net").createServer().listen(0, () => { console.log(s.address().port); s.close(); })')
PORT=$port DEMO_START_BURST=5 node apps/demo/dist/main.js >"$private/demo.log" 2>&1 &
demo_pid=$!
for _ in $(seq 1 600); do
  grep -q 'demo listening on' "$private/demo.log" && break
  kill -0 "$demo_pid" 2>/dev/null || { cat "$private/demo.log" >&2; echo "the demo exited during start-up" >&2; exit 1; }
  sleep 0.1
done
grep -q 'demo listening on' "$private/demo.log" || { cat "$private/demo.log" >&2; echo "the demo did not start within 60 s" >&2; exit 1; }
node -e 'fetch(process.argv[1]).then(async (r) => { if (!r.ok) process.exit(1); console.log("GET /stats:", await r.text()); })' "http://127.0.0.1:$port/stats"
kill -INT "$demo_pid"
wait "$demo_pid"
demo_pid=
grep -E 'data lives in|PostgreSQL stopped' "$private/demo.log"
[ "$(stat -c %a "$private")" = 700 ] || { echo "the private folder's mode was changed" >&2; exit 1; }
echo "private-folder check: npm test and the demo work as root under a 0700 folder, which stays 0700"
