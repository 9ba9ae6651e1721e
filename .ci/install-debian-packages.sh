#!/usr/bin/env bash
# Debian packages the tests use: postgresql (a second major version, and binaries the harness can run as
# a restartable server), pgbouncer (the transaction-pooling tests) and chromium (the dashboard's browser
# tests, driven by playwright-core: never a downloaded browser). Installs only what is missing.
set -euo pipefail
missing=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
[ -x /usr/sbin/pgbouncer ] || missing+=(pgbouncer)
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ ${#missing[@]} -eq 0 ] && exit 0
apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
# The packages start their own services; the tests start the servers they need themselves.
for service in postgresql pgbouncer; do service "$service" stop >/dev/null 2>&1 || true; done
