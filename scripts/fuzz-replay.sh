#!/usr/bin/env bash
# Replays every committed fuzz input (native/fuzz/corpus/<target>/ and
# native/fuzz/regressions/<target>/) through its target, without libFuzzer:
# each target behind native/fuzz/replay-main.cc, built with the default
# compiler and ASan + UBSan in build-test/ (the sanitized core core-test.sh
# builds, so the core compiles once for both). Part of `npm test` (test:native).
# A broken invariant or a sanitizer report fails it. docs/fuzzing.md.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir=build-test
targets=(request-scan kv-events shm-feed prefix-hash otlp-rows)

generator=()
if [ ! -f "$build_dir/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then
  generator=(-G Ninja)
fi
cmake -S . -B "$build_dir" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DKVROUTE_CORE_TEST=ON \
  -DKVROUTE_SANITIZE=ON \
  -DKVROUTE_FUZZ_REPLAY=ON >/dev/null

jobs=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
cmake --build "$build_dir" --parallel "$jobs" --target "${targets[@]/#/fuzz-replay-}"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
for target in "${targets[@]}"; do
  dirs=()
  for kind in corpus regressions; do
    [ -d "native/fuzz/$kind/$target" ] && dirs+=("native/fuzz/$kind/$target")
  done
  "$build_dir/fuzz-replay-$target" "${dirs[@]}"
done
