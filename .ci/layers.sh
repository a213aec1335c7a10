#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The layering as a check: docs/layout.md lists the source folders from the
# top, and a folder may include only folders listed below it (data flows
# down, never back up). This reads that list and every #include "..." in
# src/, and fails on an include of a folder listed above the includer, or
# on a folder of src/ that the list does not name. include/coll.h and
# include/coll_transport.h are the interface every layer may use.
set -euo pipefail
cd "$(dirname "$0")/.."

includes() {
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git grep -n '^#include "' -- 'src/*.c' 'src/*.h'
  else
    grep -rn --include='*.[ch]' '^#include "' src
  fi
}

includes |
  awk -v layout=docs/layout.md '
    BEGIN {
      # The folders in their order: the src/ lines of the listing.
      while ((getline line < layout) > 0)
        if (match(line, /^src\/[a-z_\/]*\/ /))
          level[substr(line, 1, RLENGTH - 1)] = n++
      if (n < 2) { print "layers: no src/ folders in " layout; bad = 1; exit }
    }
    function dir(path) { sub(/[^\/]*$/, "", path); return path }
    {
      split($0, f, ":")
      from = dir(f[1])
      if (!(from in level)) {
        if (!(from in told)) print "layers: " from " is not listed in " layout
        told[from] = 1; bad = 1; next
      }
      match($0, /#include "[^"]*"/)
      inc = substr($0, RSTART + 10, RLENGTH - 11)
      if (inc == "coll.h" || inc == "coll_transport.h" || inc !~ /\//) next
      to = dir("src/" inc)
      if (!(to in level)) {
        print "layers: " f[1] ":" f[2] " includes " inc ", in no listed folder"
        bad = 1
      } else if (level[to] < level[from]) {
        print "layers: " f[1] ":" f[2] " includes " inc "; " to \
              " is listed above " from " in " layout
        bad = 1
      }
    }
    END {
      if (bad) { print "layers: an include runs back up"; exit 1 }
      print "layers: " n " folders; every include runs down"
    }'
