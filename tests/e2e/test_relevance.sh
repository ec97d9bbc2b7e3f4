#!/usr/bin/env bash
# Relevance gate: Quarry's nDCG@10 must reach SQLite FTS5's (measured in the same run,
# less 0.005) on every judged collection present. The research-only collections
# (../shared/corpora/, never committed) are reported "n/a" when absent, which is
# not a skip; a committed collection (corpora/) that is absent fails.
# Runs the metric self-test first. About a minute for all ten collections.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
"$PY" bench/relevance.py --selftest >/dev/null || { echo "relevance metric self-test failed"; "$PY" bench/relevance.py --selftest; exit 1; }
exec "$PY" bench/relevance.py --check
