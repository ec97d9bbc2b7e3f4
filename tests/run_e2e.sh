#!/usr/bin/env bash
# Runs every end-to-end test (tests/e2e/test_*.sh and test_*.py) against
# build/quarry; each prints its own checks.  Closing line: "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
export QUARRY_BIN="${QUARRY_BIN:-$PWD/${BUILD:-build}/quarry}"
pass=0; fail=0; skipped=0; failed=()
for t in tests/e2e/test_*.sh tests/e2e/test_*.py; do
  [ -e "$t" ] || continue
  if [ -n "${E2E_ONLY:-}" ] && [[ "$t" != *"$E2E_ONLY"* ]]; then continue; fi
  start=$(date +%s)
  case "$t" in
    *.py) out=$(/usr/bin/python3 "$t" 2>&1); rc=$? ;;
    *)    out=$(bash "$t" 2>&1); rc=$? ;;
  esac
  secs=$(( $(date +%s) - start ))
  if [ $rc -eq 0 ]; then
    pass=$((pass + 1)); echo "PASS $t (${secs}s)"
    printf '%s\n' "$out" | grep -E '^(SKIP|skip)' | sed 's/^/    /'
  elif [ $rc -eq 77 ]; then
    skipped=$((skipped + 1)); echo "SKIP $t: $(printf '%s\n' "$out" | tail -1)"
  else
    fail=$((fail + 1)); failed+=("$t"); echo "FAIL $t (${secs}s)"
    printf '%s\n' "$out" | tail -40 | sed 's/^/    /'
  fi
done
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "e2e: $pass passed, $fail failed, $skipped skipped"
[ $fail -eq 0 ]
