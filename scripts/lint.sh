#!/usr/bin/env bash
# Style gate run by `make test`: clang-format (Google base, .clang-format) over every C++ file
# and clang-tidy (.clang-tidy) over the core, CLI and CUPTI sources, using the compile
# database of the build folder given as $1.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
mapfile -t files < <(git ls-files -co --exclude-standard -- 'include/*.h' 'graphcheck/*.h' 'graphcheck/*.cc' \
  'cupti/*.h' 'cupti/*.cc' 'tests/*.h' 'tests/*.cc' 'bench/*.cc' 'python/*.cc')
clang-format --dry-run --Werror "${files[@]}"
echo "lint: clang-format clean (${#files[@]} files)"
mapfile -t tidy < <(printf '%s\n' "${files[@]}" | grep -E '^(graphcheck|cupti)/.*\.cc$' | grep -v '^graphcheck/torch/' || true)
if [ ${#tidy[@]} -gt 0 ]; then
  printf '%s\n' "${tidy[@]}" | xargs -P "$(nproc)" -n 4 clang-tidy -p "$build" --quiet --extra-arg=-Wno-unknown-warning-option 2>/dev/null
fi
echo "lint: clang-tidy clean (${#tidy[@]} files)"
