#!/usr/bin/env bash
# Runs every end-to-end test (tests/e2e/test_*.sh and test_*.py) against
# build/quarry; each prints its own checks.  Closing line: "N passed, N failed,
# N skipped".
#
# Skips: a test that exits 77 skipped as a whole, and a passing test that
# printed lines starting "SKIP"/"skip" skipped a part; both are listed with
# their reasons.  With CI=true (or 1) any skip fails the run: make deps
# installs everything the tests use, so a skip means a missing dependency.
#
# Each test gets E2E_TIMEOUT seconds (default 1800), a bound that only turns
# a hang into a failure.
set -u
cd "$(dirname "$0")/.."
. tests/skips.sh
export QUARRY_BIN="${QUARRY_BIN:-$PWD/${BUILD:-build}/quarry}"
limit=${E2E_TIMEOUT:-1800}
pass=0; fail=0; failed=(); skips=()
for t in tests/e2e/test_*.sh tests/e2e/test_*.py; do
  [ -e "$t" ] || continue
  if [ -n "${E2E_ONLY:-}" ] && [[ "$t" != *"$E2E_ONLY"* ]]; then continue; fi
  start=$(date +%s)
  case "$t" in
    *.py) out=$(timeout -k 10 "$limit" /usr/bin/python3 "$t" 2>&1); rc=$? ;;
    *)    out=$(timeout -k 10 "$limit" bash "$t" 2>&1); rc=$? ;;
  esac
  secs=$(( $(date +%s) - start ))
  if [ $rc -eq 0 ]; then
    pass=$((pass + 1)); echo "PASS $t (${secs}s)"
    while IFS= read -r line; do
      echo "    SKIPPED PART: $line"; skips+=("$t: $line")
    done < <(printf '%s\n' "$out" | grep -E '^(SKIP|skip)\b')
  elif [ $rc -eq 77 ]; then
    reason=$(printf '%s\n' "$out" | grep -E '^(SKIP|skip)\b' | tail -1)
    reason=${reason:-$(printf '%s\n' "$out" | tail -1)}
    echo "SKIP $t: $reason"; skips+=("$t: $reason")
  else
    fail=$((fail + 1)); failed+=("$t")
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
      echo "FAIL $t (${secs}s): no end after ${limit} s (E2E_TIMEOUT), stopped"
    else
      echo "FAIL $t (${secs}s)"
    fi
    printf '%s\n' "$out" | tail -40 | sed 's/^/    /'
  fi
done
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "e2e: $pass passed, $fail failed, ${#skips[@]} skipped"
report_skips e2e ${skips[@]+"${skips[@]}"} || fail=$((fail + 1))
[ $fail -eq 0 ]
