#!/usr/bin/env bash
# Browser test of the admin page: `quarry serve` on a free loopback port with
# 3,000 Debian package descriptions, then headless Chromium (Debian's
# /usr/bin/chromium) driven by playwright-core (npm, installed here into
# tests/e2e/node_modules from package-lock.json) runs test_admin_page.mjs.
# Screenshots go to tests/output/admin-page/.  A second server that requires
# API keys then checks the page's key prompt (test_admin_key.mjs).  The first
# server also listens on the PostgreSQL port: statements psql sends there must
# show in the page's query history with their plans.
# Exit 77 (skip) with a reason
# when node, npm, the npm package or chromium is unavailable.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
BIN=${QUARRY_BIN:-$ROOT/build/quarry}
OUT=$ROOT/tests/output/admin-page
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}

command -v node >/dev/null || { echo "skip: node is not installed (make deps installs Debian nodejs)"; exit 77; }
command -v npm >/dev/null || { echo "skip: npm is not installed (make deps installs Debian npm)"; exit 77; }
[ -x "$CHROMIUM" ] || { echo "skip: $CHROMIUM is missing (make deps installs Debian chromium)"; exit 77; }
tests/npm_deps.sh tests/e2e >/dev/null ||
  { echo "skip: npm ci of playwright-core failed in tests/e2e (make deps installs it)"; exit 77; }

work=$(mktemp -d /tmp/quarry-admin-XXXXXX)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
# start_server DATA LOG [ARGS...]: `quarry serve` on a free loopback port; sets pid and port
start_server() {
  : >"$2"
  "$BIN" serve --data "$1" --http 127.0.0.1:0 "${@:3}" >"$2" 2>&1 &
  pid=$!
  port=
  for _ in $(seq 100); do
    port=$(sed -nE 's/.*serve started .*http=http:\/\/127\.0\.0\.1:([0-9]+)\/.*/\1/p' "$2" | head -1)
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$port" ]; then echo "FAILED: server did not start"; cat "$2"; exit 1; fi
}
start_server "$work/data" "$work/serve.log" --pg 127.0.0.1:0
base=http://127.0.0.1:$port
pgport=$(sed -nE 's/.*serve pg=127\.0\.0\.1:([0-9]+).*/\1/p' "$work/serve.log" | head -1)
[ -n "$pgport" ] || { echo "FAILED: the PG port did not start"; exit 1; }
command -v psql >/dev/null || { echo "skip: psql is not installed (make deps installs postgresql-client)"; exit 77; }

# a table with the sample corpus' schema and its first 3,000 documents
python3 - "$ROOT/corpora/debian-packages/schema.json" >"$work/create.json" <<'PY'
import json, sys
print(json.dumps({"name": "packages", "schema": json.load(open(sys.argv[1]))}))
PY
curl -sf -X POST "$base/tables" -H 'Content-Type: application/json' --data-binary @"$work/create.json" >/dev/null \
  || { echo "FAILED: create table"; exit 1; }
zcat "$ROOT/corpora/debian-packages/docs.jsonl.gz" | head -3000 | gzip >"$work/docs.jsonl.gz"
curl -sf -X POST "$base/tables/packages/documents" -H 'Content-Type: application/x-ndjson' \
  -H 'Content-Encoding: gzip' --data-binary @"$work/docs.jsonl.gz" >/dev/null \
  || { echo "FAILED: ingest"; exit 1; }
printf '{"id": "u1", "title": "uploaded one"}\n{broken\n{"id": "u2", "title": "uploaded two"}\n' >"$work/upload.jsonl"

# statements over the PG port, for the query history (one fails on purpose)
PG_OK="SELECT id, section FROM packages WHERE section = 'utils' ORDER BY id LIMIT 3"
PG_BAD="SELECT nope FROM packages"
psql -X -q -h 127.0.0.1 -p "$pgport" -U admin_page -d quarry -c "$PG_OK" >/dev/null \
  || { echo "FAILED: psql statement"; exit 1; }
psql -X -q -h 127.0.0.1 -p "$pgport" -U admin_page -d quarry -c "$PG_BAD" >/dev/null 2>&1 \
  && { echo "FAILED: the bad statement ran"; exit 1; }
export PG_OK PG_BAD

# the oracle for the table view and the SQL console, computed from the file
python3 - "$work/docs.jsonl.gz" >"$work/expected.json" <<'PY'
import gzip, json, sys, collections
docs = [json.loads(l) for l in gzip.open(sys.argv[1], "rt")]
sizes = [d["installed_size_kb"] for d in docs if d.get("installed_size_kb") is not None]
sections = collections.Counter(d.get("section") for d in docs)
top = sorted(sections.items(), key=lambda kv: (-kv[1], kv[0] or ""))[:5]
print(json.dumps({"size_min": min(sizes), "size_max": max(sizes),
                  "size_nulls": len(docs) - len(sizes), "docs": len(docs),
                  "sections_distinct": len(sections), "top_sections": top}))
PY

mkdir -p "$OUT"
NODE_PATH=$ROOT/tests/e2e/node_modules node tests/e2e/test_admin_page.mjs "$base" "$OUT" "$work/upload.jsonl" "$CHROMIUM" "$work/expected.json"
rc=$?
if grep -q ' ERROR ' "$work/serve.log"; then echo "FAILED: server logged errors"; grep ' ERROR ' "$work/serve.log" | head; rc=1; fi
kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=

# the same page against a server that requires API keys: the key prompt
key=$("$BIN" key add admin-page --scope admin --data "$work/kdata" 2>/dev/null | head -1)
[ -n "$key" ] || { echo "FAILED: quarry key add"; exit 1; }
start_server "$work/kdata" "$work/kserve.log"
kbase=http://127.0.0.1:$port
auth="Authorization: Bearer $key"
curl -sf -X POST "$kbase/tables" -H "$auth" -H 'Content-Type: application/json' --data-binary @"$work/create.json" >/dev/null \
  || { echo "FAILED: create table on the keyed server"; exit 1; }
zcat "$work/docs.jsonl.gz" | head -250 | curl -sf -X POST "$kbase/tables/packages/documents" -H "$auth" \
  -H 'Content-Type: application/x-ndjson' --data-binary @- >/dev/null || { echo "FAILED: keyed ingest"; exit 1; }
[ "$(curl -s -o /dev/null -w '%{http_code}' "$kbase/tables")" = 401 ] || { echo "FAILED: keyed server answers without a key"; rc=1; }
NODE_PATH=$ROOT/tests/e2e/node_modules node tests/e2e/test_admin_key.mjs "$kbase" "$CHROMIUM" "$key" packages 250 || rc=1
exit $rc
