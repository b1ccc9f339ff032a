#!/usr/bin/env bash
# Builds the ThreadSanitizer stress test of the shared routing core
# (native/test/shared-core-stress.cc, the router's sources compiled with
# -fsanitize=thread) in build-tsan/ and runs it: N threads routing through the
# binding's sequence (core/route-call.h) while others complete, abort, change
# instances, groups, costs, policy and KV events. TSan fails the run (exit 66)
# on any data race. Run from anywhere: `npm run test:tsan` (npm run test:native
# runs it too). Arguments go to the test: [threads [ops-per-thread [seconds [seed]]]].
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir=build-tsan

if ! command -v g++ >/dev/null 2>&1 && ! command -v clang++ >/dev/null 2>&1; then
  echo "tsan-test: SKIPPED: no C++ compiler (g++ or clang++) on PATH"
  exit 0
fi

generator=()
if [ ! -f "$build_dir/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then
  generator=(-G Ninja)
fi

start=$(date +%s)
cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVROUTE_TSAN_TEST=ON >/dev/null
jobs=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
cmake --build "$build_dir" --target shared-core-stress --parallel "$jobs"
built=$(date +%s)

# halt_on_error: the first race fails the run at once, with both stacks.
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}"
if [ $# -eq 0 ]; then
  set -- 4 20000 60
fi
"$build_dir/shared-core-stress" "$@"
echo "tsan-test: built in $((built - start)) s, ran in $(($(date +%s) - built)) s"
