# Sourced by tests/run_unit.sh and tests/run_e2e.sh: the one rule for skipped
# tests.  report_skips LABEL SKIP... lists each skip (it names the test and
# what is missing) and returns 1 when CI is "true" (any case) or "1": make
# deps installs everything the tests use, so in CI a test that cannot run is
# a failure, never a quiet pass.  Returns 0 when nothing was skipped.
report_skips() {
  local label=$1; shift
  [ $# -gt 0 ] || return 0
  echo "$label: skipped (each names what is missing):"
  printf '    %s\n' "$@"
  case "${CI:-}" in
    [Tt][Rr][Uu][Ee]|1)
      echo "$label: CI=$CI and $# skipped: a test that cannot run fails the run here;" \
           "make deps installs everything the tests use"
      return 1 ;;
  esac
  return 0
}
