#!/usr/bin/env bash
# make demo: import the bundled Debian package descriptions (first run only),
# show a few searches, then serve the data over HTTP with the admin page when
# this build has `quarry serve`.
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
if $Q --help | grep -q '^  serve'; then
  PORT=${QUARRY_DEMO_PORT:-8080}
  echo
  echo "== serving $DATA: admin page at http://127.0.0.1:$PORT/  (Ctrl-C stops)"
  exec $Q serve --data "$DATA" --http "127.0.0.1:$PORT"
fi
