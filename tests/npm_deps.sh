#!/usr/bin/env bash
# Installs the npm packages the end-to-end tests use, exactly as their lock
# files pin them (`npm ci`), into each directory's node_modules/:
#   tests/e2e/          playwright-core (the admin-page browser test)
#   tests/e2e/pg_node/  pg, pg-cursor, postgres (node-postgres and postgres.js
#                       against the PG port: test_pg_node.sh, the conformance suite)
#   tests/e2e/knex/     knex and pg (the conformance suite's knex client)
# A directory whose node_modules already matches its lock file is left alone,
# so `make deps` runs offline once done; --prefer-offline uses npm's cache
# before the registry.  Run by `make deps`, and by the two tests when their
# packages are missing.  Usage: tests/npm_deps.sh [DIR...]; exit 1 naming the
# directory that could not be installed.
set -u
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- tests/e2e tests/e2e/pg_node tests/e2e/knex
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "npm packages: node and npm are needed (Debian nodejs and npm; make deps installs them)" >&2
  exit 1
fi
rc=0
for d in "$@"; do
  lock=$d/package-lock.json
  [ -f "$lock" ] || { echo "npm packages: no $lock" >&2; rc=1; continue; }
  # npm ci leaves node_modules/.package-lock.json; newer than the lock file = installed
  if [ -f "$d/node_modules/.package-lock.json" ] && [ ! "$lock" -nt "$d/node_modules/.package-lock.json" ]; then
    continue
  fi
  echo "npm packages: npm ci in $d"
  if ! out=$(cd "$d" && timeout 600 npm ci --prefer-offline --no-audit --no-fund --loglevel=error 2>&1); then
    printf '%s\n' "$out" | tail -20 >&2
    echo "npm packages: npm ci failed in $d (is the npm registry reachable?)" >&2
    rc=1
  fi
done
exit $rc
