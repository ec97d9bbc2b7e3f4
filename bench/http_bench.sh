#!/usr/bin/env bash
# HTTP throughput and latency of `quarry serve` with wrk (Debian `wrk`):
# GET /health and ranked search at 1, 8 and 64 connections, against the same
# queries through the engine directly (`quarry bench`, one thread) to show
# the cost of the HTTP path.  Also times the JSONL upload of the corpus.
#
#   bench/http_bench.sh [N]          N articles of bench/gen_news.py (default 200000)
#
# Env: DURATION (seconds per wrk run, default 10), LOG_REQUESTS (true|false,
# default true: the shipped setting, one log line per request to a file),
# DATA (a data
# directory that already holds the table "news", e.g. one `quarry import` made:
# copied and used instead of uploading the corpus), PERF=1 (profile the server
# with `perf` during the 8-connection ranked run and split its CPU time into
# engine, HTTP server, kernel and libc).
# Writes bench/results/<date>-http-<N>.md and prints it.  The server binds
# 127.0.0.1 only and is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
N=${1:-200000}
DURATION=${DURATION:-10}
LOG_REQUESTS=${LOG_REQUESTS:-true}
BIN=${QUARRY_BIN:-$ROOT/build/quarry}
WORK=$ROOT/bench/work/http-$N
CORPUS=$ROOT/bench/work/news-$N.jsonl
command -v wrk >/dev/null || { echo "wrk is not installed (make deps)"; exit 1; }
[ -x "$BIN" ] || { echo "build first: make"; exit 1; }
[ -f "$CORPUS" ] || python3 bench/gen_news.py --n "$N" --out "$CORPUS"

rm -rf "$WORK"
mkdir -p "$WORK"
cat >"$WORK/serve.json" <<EOF
{"log_requests": $LOG_REQUESTS, "max_connections": 1024}
EOF
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true; }
trap cleanup EXIT
start_server() {
  "$BIN" serve --data "$WORK/data" --http 127.0.0.1:0 --config "$WORK/serve.json" \
    >"$WORK/serve.log" 2>&1 &
  pid=$!
  port=
  for _ in $(seq 200); do
    port=$(sed -nE 's/.*serve started .*http=http:\/\/127\.0\.0\.1:([0-9]+)\/.*/\1/p' "$WORK/serve.log" | head -1)
    [ -n "$port" ] && break
    sleep 0.05
  done
  [ -n "$port" ] || { cat "$WORK/serve.log"; exit 1; }
  BASE=http://127.0.0.1:$port
}
stop_server() { kill "$pid"; wait "$pid" || true; pid=; }

if [ -n "${DATA:-}" ]; then
  cp -r "$DATA" "$WORK/data" && rm -f "$WORK/data/LOCK"
fi
start_server
if [ -n "${DATA:-}" ]; then
  ingested=$(curl -sf "$BASE/tables/news" | python3 -c "import json,sys; print(json.load(sys.stdin)['stats']['docs'])")
  ingest_s=
else
curl -sf -X POST "$BASE/tables" -H 'Content-Type: application/json' -d '{"name": "news", "schema":
  {"primary_key": "id", "fields": [{"name": "title", "type": "text", "weight": 2},
   {"name": "body", "type": "text"}, {"name": "symbol", "type": "keyword"},
   {"name": "published", "type": "timestamp"}, {"name": "views", "type": "int"}]}}' >/dev/null
t0=$(date +%s.%N)
curl -sf -X POST "$BASE/tables/news/documents?batch=20000" -H 'Content-Type: application/x-ndjson' \
  -H 'Transfer-Encoding: chunked' --data-binary @"$CORPUS" >"$WORK/ingest.json"
t1=$(date +%s.%N)
curl -sf -X POST "$BASE/tables/news/merge" >/dev/null
ingest_s=$(python3 -c "print('%.1f' % ($t1 - $t0))")
ingested=$(python3 -c "import json; r = json.load(open('$WORK/ingest.json')); print(r['imported'] + r['replaced'])")
fi

# queries: two-word ranked searches made of title words of the corpus
python3 - "$CORPUS" "$WORK" <<'PY'
import json, sys, random
from urllib.parse import quote
corpus, work = sys.argv[1], sys.argv[2]
rng = random.Random(7)
titles = []
with open(corpus) as f:
    for i, line in enumerate(f):
        if i >= 2000:
            break
        titles.append(json.loads(line)["title"].split())
qs = [" ".join(rng.sample(t, 2)) for t in rng.sample(titles, 50)]
with open(work + "/queries.jsonl", "w") as f:
    for i, q in enumerate(qs):
        f.write(json.dumps({"qid": i, "q": q, "mode": "top", "limit": 10}) + "\n")
for name, extra in (("search.lua", "&total=false"), ("search_total.lua", "")):
    with open(work + "/" + name, "w") as f:
        f.write("local paths = {\n")
        for q in qs:
            f.write('  "/tables/news/search?q=%s&limit=10&doc=false%s",\n' % (quote(q), extra))
        f.write("}\nlocal i = 0\nrequest = function()\n  i = i % #paths + 1\n"
                "  return wrk.format(\"GET\", paths[i])\nend\n")
PY

run_wrk() { # name url conns [script]
  local name=$1 url=$2 c=$3 script=${4:-}
  local t=$(( c < 2 ? 1 : 2 ))
  local out
  if [ -n "$script" ]; then
    out=$(wrk -t"$t" -c"$c" -d"${DURATION}s" --latency -s "$script" "$url")
  else
    out=$(wrk -t"$t" -c"$c" -d"${DURATION}s" --latency "$url")
  fi
  local rps p50 p99 errs
  rps=$(printf '%s\n' "$out" | awk '/Requests\/sec/ {print $2}')
  p50=$(printf '%s\n' "$out" | awk '$1 == "50%" {print $2}')
  p99=$(printf '%s\n' "$out" | awk '$1 == "99%" {print $2}')
  errs=$(printf '%s\n' "$out" | awk '/Non-2xx|Socket errors/ {print}' | tr '\n' ' ')
  printf '| %s | %s | %s | %s | %s | %s |\n' "$name" "$c" "$rps" "$p50" "$p99" "${errs:-none}" >>"$WORK/table.md"
}

: >"$WORK/table.md"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for c in 1 8 64; do run_wrk "GET /health" "$BASE/health" "$c"; done
for c in 1 8 64; do
  if [ "$c" = 8 ] && [ "${PERF:-0}" = 1 ] && command -v perf >/dev/null; then
    perf record -F 999 -p "$pid" -o "$WORK/perf.data" -- sleep $(( DURATION > 2 ? DURATION - 1 : 1 )) >/dev/null 2>&1 &
    perf_pid=$!
  fi
  run_wrk "ranked top 10" "$BASE" "$c" "$WORK/search.lua"
  [ -n "${perf_pid:-}" ] && { wait "$perf_pid" || true; perf_pid=; }
done
for c in 1 8 64; do run_wrk "ranked top 10 + exact total" "$BASE" "$c" "$WORK/search_total.lua"; done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
curl -sf "$BASE/stats/queries" >"$WORK/queries-history.json"
stop_server

# the same queries through the engine directly (index opened once, one thread)
"$BIN" bench news --queries "$WORK/queries.jsonl" --repeat 20 --data "$WORK/data" >"$WORK/engine.jsonl"
engine=$(python3 - "$WORK/engine.jsonl" "$(nproc)" <<'PY'
import json, sys, statistics
m = [json.loads(l)["median_ms"] for l in open(sys.argv[1])]
cores = int(sys.argv[2])
top5 = sum(sorted(m)[-5:]) / sum(m)
print("%.3f ms median and %.3f ms mean of per-query medians (%d queries; the slowest 5 take "
      "%.0f%% of the time), %.0f queries/s on one thread, so at most %.0f/s on %d cores "
      "with nothing else running" % (statistics.median(m), statistics.mean(m), len(m), 100 * top5,
                                      1000.0 / statistics.mean(m), cores * 1000.0 / statistics.mean(m), cores))
PY
)
split=
if [ -f "$WORK/perf.data" ]; then
  split=$(perf report -i "$WORK/perf.data" --no-children --sort dso,symbol --stdio -g none 2>/dev/null |
    python3 -c '
import re, sys
cats = {}
http = re.compile(r"(on_|http_|jw_|route|split_path|parse_args|pct_decode|first_call|reply|guard_|log_path|media_type|qr_log|qr_buf|normalize|fnv|record$|put$|search_plan|filter_shape|qr_query_canonical|qparse|qnode|qr_sql_normalize|qr_table_acquire|qr_table_release)")
for l in sys.stdin:
    m = re.match(r"\s+([\d.]+)%\s+(\S+)\s+\[(.)\]\s+(\S+)", l)
    if not m:
        continue
    pct, dso, kind, sym = float(m.group(1)), m.group(2), m.group(3), m.group(4)
    if kind == "k": c = "kernel (TCP, log writes)"
    elif "microhttpd" in dso: c = "libmicrohttpd"
    elif dso.startswith("quarry"): c = "HTTP server code" if http.match(sym) else "engine"
    elif "libc" in dso: c = "libc"
    else: c = "other"
    cats[c] = cats.get(c, 0) + pct
print(", ".join("%s %.1f%%" % kv for kv in sorted(cats.items(), key=lambda kv: -kv[1])))
')
fi

date=$(date -u +%Y-%m-%d)
res=$ROOT/bench/results/$date-http-$N.md
mkdir -p "$ROOT/bench/results"
{
  echo "# HTTP benchmark, $N articles ($date)"
  echo
  echo "Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo);" \
       "load average before/after: $load_before / $load_after (shared machine)."
  echo "Server: \`quarry serve\`, a thread per connection," \
       "log_requests=$LOG_REQUESTS; wrk on the same machine, ${DURATION}s per row, 2 wrk threads (1 at 1 connection)."
  echo
  if [ -n "$ingest_s" ]; then
  echo "Upload of the corpus: $ingested documents in $ingest_s s over one chunked POST" \
       "($(python3 -c "print('%.0f' % ($ingested / max($ingest_s, 0.001)))") docs/s, commit every 20000)."
  else
  echo "Data: a copy of an existing data directory ($ingested documents), no upload timed."
  fi
  echo
  echo "| endpoint | connections | requests/s | p50 | p99 | errors |"
  echo "|---|---|---|---|---|---|"
  cat "$WORK/table.md"
  echo
  echo "Ranked search: 50 two-word OR queries of title words, limit 10, ids and scores only" \
       "(\`doc=false\`); \"ranked top 10\" skips the exact count (\`total=false\`, block-max WAND" \
       "prunes), \"+ exact total\" also counts every match (the default of the API)."
  echo "Engine directly, the same queries as \"ranked top 10\" (\`quarry bench\`, mode top," \
       "index opened once, one thread): $engine."
  [ -n "$split" ] && echo "Server CPU during \"ranked top 10\" at 8 connections (perf, self time): $split."
} >"$res"
cat "$res"
