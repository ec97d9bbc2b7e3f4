#!/usr/bin/env bash
# Runs each libFuzzer target for SECONDS over its seed corpus
# (tests/fuzz/corpus/<name>/, read only: new inputs go to a scratch corpus),
# with its dictionary when tests/fuzz/<name>.dict exists.  A crash, leak or
# broken promise fails the run and leaves the input under tests/output/fuzz/.
# There is no skip: a target that cannot run fails, and so does a call with
# no targets (make fuzz-smoke always names them; none means clang is missing).
# Usage: tests/run_fuzz.sh SECONDS BIN...
set -u
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "fuzz: usage: tests/run_fuzz.sh SECONDS BIN... (no fuzz targets given)"; exit 2; }
secs=$1; shift
out=tests/output/fuzz; mkdir -p "$out"
scratch=$(mktemp -d); trap 'rm -rf "$scratch"' EXIT
pass=0; fail=0
for bin in "$@"; do
  name=$(basename "$bin"); short=${name%_fuzz}
  seeds=tests/fuzz/corpus/$short; mkdir -p "$scratch/$short"
  args=(-max_total_time="$secs" -timeout=30 -rss_limit_mb=2048 -max_len=65536
        -artifact_prefix="$out/$name-" -print_final_stats=0)
  [ -f "tests/fuzz/$short.dict" ] && args+=(-dict="tests/fuzz/$short.dict")
  dirs=("$scratch/$short"); [ -d "$seeds" ] && dirs+=("$seeds")
  if TMPDIR="$scratch" ASAN_OPTIONS=detect_leaks=1 "$bin" "${args[@]}" "${dirs[@]}" >"$out/$name.log" 2>&1; then
    pass=$((pass + 1)); echo "PASS fuzz $name ($(grep -c . "$out/$name.log") log lines, $(ls "$scratch/$short" | wc -l) new inputs)"
  else
    fail=$((fail + 1)); echo "FAIL fuzz $name"; grep -E "ERROR|check failed|SUMMARY|Test unit written" "$out/$name.log" | head -20 | sed 's/^/    /'
  fi
done
echo "fuzz: $pass passed, $fail failed"
[ $fail -eq 0 ]
