#!/usr/bin/env bash
# Builds examples/consumer against tle both ways a consuming project can: find_package(tle) on an
# installed tle, and add_subdirectory(tle). Usage: consumer_test.sh SOURCE_DIR BUILD_DIR [find|subdir]
set -euo pipefail
src=$1 build=$2 mode=${3:-find}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ "$mode" = find ]; then
  cmake --install "$build" --prefix "$work/prefix" >/dev/null
  cmake -S "$src/examples/consumer" -B "$work/b" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
else
  cmake -S "$src/examples/consumer" -B "$work/b" -DTLE_SOURCE_DIR="$src" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$work/b" -j "$(nproc)" >/dev/null
LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}" "$work/b/consumer"
