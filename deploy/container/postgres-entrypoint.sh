#!/bin/sh
# PostgreSQL for the compose file and the image test (docs/container.md). Debian's own
# postgresql-17 package in a Debian 13 minbase, built offline like the service's image. A
# managed PostgreSQL (15 or newer) replaces it in production; this one exists so that the
# two-node setup can be run and tested where no image registry is reachable.
#   POSTGRES_USER (lv), POSTGRES_PASSWORD (required), POSTGRES_DB (lv), PGDATA
set -eu
: "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is required}"
user=${POSTGRES_USER:-lv}
db=${POSTGRES_DB:-lv}
bin=/usr/lib/postgresql/17/bin
PGDATA=${PGDATA:-/var/lib/postgresql/data}
export PGDATA
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pw=$(mktemp)
  printf '%s' "$POSTGRES_PASSWORD" > "$pw"
  "$bin/initdb" --username="$user" --pwfile="$pw" --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >/dev/null
  rm -f "$pw"
  # other containers reach it over the container network, always with the password
  echo "listen_addresses = '*'" >> "$PGDATA/postgresql.conf"
  printf 'host all all 0.0.0.0/0 scram-sha-256\nhost all all ::/0 scram-sha-256\n' >> "$PGDATA/pg_hba.conf"
  # 'postgres' exists after initdb; the service's database is made without a server running
  if [ "$db" != postgres ]; then
    echo "CREATE DATABASE \"$db\" OWNER \"$user\"" | "$bin/postgres" --single -D "$PGDATA" -j postgres >/dev/null
  fi
fi
# exec: postgres is PID 1 and gets the stop signal itself (SIGINT: a fast shutdown)
exec "$bin/postgres" -D "$PGDATA" -c unix_socket_directories=/tmp "$@"
