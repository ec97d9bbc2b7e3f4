#!/usr/bin/env bash
# Layers include only downward (STYLE.md §1): store < index < query < server.
set -u
rank() { case "$1" in store) echo 0;; index) echo 1;; query) echo 2;; server) echo 3;; *) echo -1;; esac; }
bad=0
for f in src/*/*.[ch]; do
  layer=$(basename "$(dirname "$f")"); r=$(rank "$layer")
  while IFS= read -r inc; do
    dep=${inc%%/*}; dr=$(rank "$dep")
    [ "$dr" -lt 0 ] && continue
    if [ "$dr" -gt "$r" ]; then echo "layer violation: $f includes $inc"; bad=1; fi
    if [ "$layer" = server ] && [ "$dep" = index ]; then
      echo "layer violation: $f includes $inc (server/ goes through query/quarry.h)"; bad=1; fi
  done < <(sed -nE 's/^#include "([a-z]+\/[a-z0-9_]+\.h)".*/\1/p' "$f")
done
[ $bad -eq 0 ] && echo "layers: ok"
exit $bad
