#!/usr/bin/env bash
# Installs Debian's PostgreSQL (a second major version beside the embedded 18) and starts it as a
# throwaway test server on 127.0.0.1:5433. Prints the URL for DATABASE_URL.
set -euo pipefail
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >&2
fi
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
data=/tmp/pg-queue-ci-debian
if [ -f "$data/postmaster.pid" ]; then su postgres -s /bin/sh -c "$bin/pg_ctl -D $data -m immediate stop" >&2 || true; fi
rm -rf "$data" && mkdir -p "$data" && chown postgres:postgres "$data"
pwfile=$(mktemp) && echo postgres >"$pwfile" && chmod 644 "$pwfile"
su postgres -s /bin/sh -c "$bin/initdb -D $data -U postgres --pwfile=$pwfile --auth=scram-sha-256 --no-sync" >&2
rm -f "$pwfile"
su postgres -s /bin/sh -c "$bin/pg_ctl -D $data -l $data/server.log -w -o '-p 5433 -c listen_addresses=127.0.0.1 -c unix_socket_directories=/tmp -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200' start" >&2
echo "postgres://postgres:postgres@127.0.0.1:5433/postgres"
