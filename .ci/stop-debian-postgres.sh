#!/usr/bin/env bash
# Stops the server .ci/start-debian-postgres.sh started (same PG_QUEUE_CI_PG_DATA), if it is running.
set -euo pipefail
data=${PG_QUEUE_CI_PG_DATA:-/tmp/pg-queue-ci-debian}
[ -f "$data/postmaster.pid" ] || exit 0
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
su postgres -s /bin/sh -c "$bin/pg_ctl -D '$data' -m fast -w stop" >&2
