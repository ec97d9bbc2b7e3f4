#!/usr/bin/env bash
# make demo: import the bundled Debian package descriptions (first run only),
# show a few searches and SQL queries, then serve the data: HTTP API + admin
# page and the PostgreSQL port, on localhost.
set -euo pipefail
cd "$(dirname "$0")/.."
Q=build/quarry
DATA=${QUARRY_DEMO_DATA:-./data}
if ! $Q tables --data "$DATA" 2>/dev/null | grep -q '^packages:'; then
  echo "== importing the sample corpus (Debian package descriptions)"
  $Q import packages corpora/debian-packages/docs.jsonl.gz \
     --schema corpora/debian-packages/schema.json --data "$DATA"
fi
run() { echo; echo "\$ quarry search packages $*"; $Q search packages "$@" --data "$DATA"; }
run 'terminal emulator' --limit 3
run '"window manager" -tiling' --limit 3
run 'title:rust^2 OR compil*' --limit 3
run 'databse~1' --count
run 'terminal emulator' --filter "section = 'x11' AND installed_size_kb < 2000" \
    --sort installed_size_kb:desc --limit 3
sql() { echo; echo "\$ quarry sql -c \"$1\""; $Q sql --data "$DATA" -c "$1"; }
sql "SELECT section, count(*) AS n, avg(installed_size_kb)::int AS avg_kb FROM packages WHERE body @@ 'python web' GROUP BY section ORDER BY n DESC LIMIT 5"
sql "SELECT id, round(score()::numeric, 2) AS score, title FROM packages WHERE body @@ 'terminal emulator' AND NOT essential ORDER BY score() DESC LIMIT 3"
PORT=${QUARRY_DEMO_PORT:-8080}
PG=${QUARRY_DEMO_PG_PORT:-5433}
echo
echo "== serving $DATA (Ctrl-C stops)"
echo "   admin page:  http://127.0.0.1:$PORT/"
echo "   HTTP API:    curl 'http://127.0.0.1:$PORT/tables/packages/search?q=terminal+emulator&limit=3'"
echo "   PostgreSQL:  psql -h 127.0.0.1 -p $PG quarry"
exec $Q serve --data "$DATA" --http "127.0.0.1:$PORT" --pg "127.0.0.1:$PG"
