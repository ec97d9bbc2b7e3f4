#!/usr/bin/env bash
# Runs every Criterion unit-test binary given, prints each binary's synthesis
# and a closing "N passed, N failed, N skipped" line; exits non-zero if
# anything failed.  Skipped tests (cr_skip_test, .disabled) are listed with
# their reasons; with CI=true (or 1) any skip fails the run, as in
# tests/run_e2e.sh.
set -u
. "$(dirname "$0")/skips.sh"
[ $# -gt 0 ] || { echo "unit: no test binaries given"; exit 2; }
pass=0; fail=0; bad_bins=(); skips=()
for bin in "$@"; do
  # --verbose: Criterion names skipped tests only at this level ("[SKIP] ...")
  out=$("$bin" --jobs 2 --verbose 2>&1); rc=$?
  syn=$(printf '%s\n' "$out" | grep -E 'Synthesis: Tested' | tail -1)
  t=$(printf '%s' "$syn" | sed -nE 's/.*Tested: ([0-9]+).*/\1/p'); t=${t:-0}
  p=$(printf '%s' "$syn" | sed -nE 's/.*Passing: ([0-9]+).*/\1/p'); p=${p:-0}
  pass=$((pass + p)); f=$((t - p))
  if [ "$rc" -ne 0 ] || [ -z "$syn" ]; then
    [ "$f" -gt 0 ] || f=1
    printf '%s\n' "$out" | grep -vE '^\[----\] +(Criterion|Running)|^\[(RUN |PASS)\]|^\[====\] Running' | tail -40
    bad_bins+=("$bin")
  fi
  while IFS= read -r line; do
    skips+=("${bin#*/}: ${line#\[SKIP\] }")
  done < <(printf '%s\n' "$out" | grep -E '^\[SKIP\]')
  fail=$((fail + f))
  printf '%-50s %s\n' "${bin#*/}" "${syn:-no synthesis (crashed?)}"
done
[ ${#bad_bins[@]} -gt 0 ] && echo "failing binaries: ${bad_bins[*]}"
echo "unit: $pass passed, $fail failed, ${#skips[@]} skipped"
report_skips unit ${skips[@]+"${skips[@]}"} || fail=$((fail + 1))
[ "$fail" -eq 0 ]
