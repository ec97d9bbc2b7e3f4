#!/usr/bin/env bash
# Runs every Criterion unit-test binary given, prints each binary's synthesis
# and a closing "N passed, N failed" line; exits non-zero if anything failed.
set -u
pass=0; fail=0; bad_bins=()
for bin in "$@"; do
  out=$("$bin" --jobs 2 2>&1); rc=$?
  syn=$(printf '%s\n' "$out" | grep -E 'Synthesis: Tested' | tail -1)
  t=$(printf '%s' "$syn" | sed -nE 's/.*Tested: ([0-9]+).*/\1/p'); t=${t:-0}
  p=$(printf '%s' "$syn" | sed -nE 's/.*Passing: ([0-9]+).*/\1/p'); p=${p:-0}
  pass=$((pass + p)); f=$((t - p))
  if [ "$rc" -ne 0 ] || [ -z "$syn" ]; then
    [ "$f" -gt 0 ] || f=1
    printf '%s\n' "$out" | grep -vE '^\[----\] +(Criterion|Running)' | tail -40
    bad_bins+=("$bin")
  fi
  fail=$((fail + f))
  printf '%-50s %s\n' "${bin#*/}" "${syn:-no synthesis (crashed?)}"
done
[ ${#bad_bins[@]} -gt 0 ] && echo "failing binaries: ${bad_bins[*]}"
echo "unit: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
