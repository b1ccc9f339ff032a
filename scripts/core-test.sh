#!/usr/bin/env bash
# Builds the plain C++ core (kvroute_core) and the core test (native/test/,
# main() in core-test.cc) with AddressSanitizer + UndefinedBehaviorSanitizer
# in build-test/, then runs the randomized stress test. Run from anywhere:
# `npm run test:native`.
# Arguments are passed to core-test: [seed [scale]].
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir=build-test

generator=()
if [ ! -f "$build_dir/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then
  generator=(-G Ninja)
fi

cmake -S . -B "$build_dir" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DKVROUTE_CORE_TEST=ON \
  -DKVROUTE_SANITIZE=ON

jobs=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
cmake --build "$build_dir" --target core-test --parallel "$jobs"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
start=$(date +%s)
"$build_dir/core-test" "$@"
echo "core-test finished in $(( $(date +%s) - start )) s"
