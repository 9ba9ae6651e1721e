#!/usr/bin/env bash
# Installs Debian's PostgreSQL (a second major version beside the embedded 18) and PgBouncer, and starts
# PostgreSQL as a throwaway test server (its data folder is wiped first). Prints the URL for DATABASE_URL.
# PG_QUEUE_CI_PG_PORT (default 5433) and PG_QUEUE_CI_PG_DATA (default /tmp/pg-queue-ci-debian) choose
# where; .ci/stop-debian-postgres.sh stops it (same variables).
set -euo pipefail
port=${PG_QUEUE_CI_PG_PORT:-5433}
data=${PG_QUEUE_CI_PG_DATA:-/tmp/pg-queue-ci-debian}
"$(dirname "$0")/install-debian-packages.sh"
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
if [ -f "$data/postmaster.pid" ]; then su postgres -s /bin/sh -c "$bin/pg_ctl -D '$data' -m immediate stop" >&2 || true; fi
rm -rf "$data" && mkdir -p "$data" && chown postgres:postgres "$data"
pwfile=$(mktemp) && echo postgres >"$pwfile" && chmod 644 "$pwfile"
su postgres -s /bin/sh -c "$bin/initdb -D '$data' -U postgres --pwfile=$pwfile --auth=scram-sha-256 --no-sync" >&2
rm -f "$pwfile"
su postgres -s /bin/sh -c "$bin/pg_ctl -D '$data' -l '$data/server.log' -w -o '-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories=/tmp -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200' start" >&2
echo "postgres://postgres:postgres@127.0.0.1:$port/postgres"
