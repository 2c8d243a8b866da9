#!/usr/bin/env bash
# Builds a project that uses tle both ways a consuming project can. Usage:
#   consumer_test.sh SOURCE_DIR BUILD_DIR [find|subdir]
# find:   runs the README's "Use tle from your CMake project" section as written: its install
#         command (on BUILD_DIR), its CMakeLists.txt (which sets no C++ standard) around
#         examples/consumer/main.cpp, and its configure, build and run commands, with HOME in a
#         scratch directory (the README installs under $HOME/.local/tle).
# subdir: examples/consumer with add_subdirectory(tle).
# Either way the program prints "consumer: ok".
set -euo pipefail
src=$1 build=$2 mode=${3:-find}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The fenced block after the line `<!-- consumer-test: NAME -->` in the README.
block() {
  awk -v tag="<!-- consumer-test: $1 -->" '
    $0 == tag { found = 1; next }
    found && /^```/ { if (inside) exit; inside = 1; next }
    found && inside { print }' "$src/README.md"
}

if [ "$mode" = find ]; then
  for b in install cmakelists build; do
    if [ -z "$(block $b)" ]; then
      echo "consumer_test.sh: README.md has no '<!-- consumer-test: $b -->' block" >&2
      exit 1
    fi
  done
  mkdir -p "$work/home" "$work/app"
  ln -s "$(cd "$build" && pwd)" "$work/build"
  block cmakelists > "$work/app/CMakeLists.txt"
  cp "$src/examples/consumer/main.cpp" "$work/app/main.cpp"
  (cd "$work" && HOME="$work/home" bash -euo pipefail -c "$(block install)") >/dev/null
  (cd "$work" && HOME="$work/home" bash -euo pipefail -c "$(block build)") 2>&1 | grep -v '^--' || true
else
  cmake -S "$src/examples/consumer" -B "$work/b" -DTLE_SOURCE_DIR="$src" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$work/b" -j "$(nproc)" >/dev/null
  "$work/b/consumer"
fi
