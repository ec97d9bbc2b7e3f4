#!/usr/bin/env bash
# node-postgres (npm "pg", installed into tests/e2e/pg_node/ by npm_deps.sh) against
# `quarry serve --pg 127.0.0.1:0` on a temporary data directory: see
# test_pg_node.mjs.  Skips (77) when node/npm or the package are unavailable.
set -u
cd "$(dirname "$0")"
BIN=${QUARRY_BIN:-../../build/quarry}
command -v node >/dev/null && command -v npm >/dev/null ||
  { echo "skip: node/npm not installed (make deps installs Debian nodejs and npm)"; exit 77; }
../npm_deps.sh tests/e2e/pg_node >/dev/null ||
  { echo "skip: npm ci of pg failed in tests/e2e/pg_node (make deps installs it)"; exit 77; }
work=$(mktemp -d); trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$work"' EXIT
"$BIN" serve --data "$work/data" --http 127.0.0.1:0 --pg 127.0.0.1:0 >"$work/log" 2>&1 &
pid=$!
port=""
for _ in $(seq 1 200); do
  port=$(sed -nE 's/.*serve pg=127\.0\.0\.1:([0-9]+) .*/\1/p' "$work/log" | head -1)
  [ -n "$port" ] && grep -q "serve started" "$work/log" && break
  sleep 0.05
done
[ -n "$port" ] || { echo "FAILED: server did not start"; cat "$work/log"; exit 1; }
PGPORT=$port node test_pg_node.mjs; rc=$?
kill -TERM "$pid"; wait "$pid"; src=$?
[ $src -eq 0 ] || { echo "FAILED: server exit status $src"; tail -20 "$work/log"; rc=1; }
exit $rc
