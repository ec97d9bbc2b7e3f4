#!/usr/bin/env bash
# Layers include only downward (STYLE.md §1): store < index < query < server.
# A file's layer is its top folder under src/ (src/query/exec/op_scan.c is query/).
set -u
rank() { case "$1" in store) echo 0;; index) echo 1;; query) echo 2;; server) echo 3;; *) echo -1;; esac; }
bad=0
shopt -s nullglob
for f in src/*/*.[ch] src/*/*/*.[ch]; do
  layer=${f#src/}; layer=${layer%%/*}; r=$(rank "$layer")
  while IFS= read -r inc; do
    dep=${inc%%/*}; dr=$(rank "$dep")
    [ "$dr" -lt 0 ] && continue
    if [ "$dr" -gt "$r" ]; then echo "layer violation: $f includes $inc"; bad=1; fi
    if [ "$layer" = server ] && [ "$dep" = index ]; then
      echo "layer violation: $f includes $inc (server/ goes through query/quarry.h)"; bad=1; fi
    if [ "$layer" = server ] && [[ "$inc" == query/exec/* ]]; then
      echo "layer violation: $f includes $inc (server/ reaches SQL through query/sql.h)"; bad=1; fi
  done < <(sed -nE 's/^#include "([a-z]+(\/[a-z0-9_]+)+\.h)".*/\1/p' "$f")
done
[ $bad -eq 0 ] && echo "layers: ok"
exit $bad
