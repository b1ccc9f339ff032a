#!/usr/bin/env bash
# Builds the libFuzzer targets (native/fuzz/, clang with ASan + UBSan) in
# build-fuzz/ and runs each for a bounded time: `scripts/fuzz.sh [seconds per
# target]` (default 50; CI's leg). Each run starts from the committed corpus
# and regression cases and writes what it discovers to build-fuzz/corpus/<target>/
# (not the repository: merging back is a deliberate step, docs/fuzzing.md).
# Prints executions per target and in total. A crash, a broken invariant, a
# leak or a timeout fails the script; the input is saved in build-fuzz/crashes/<target>/
# and named on the output, to be kept as a regression case.
# Without clang (or its libFuzzer runtime) it says so and exits 0: the leg is skipped.
# Environment: FUZZ_TARGETS (space-separated subset), FUZZ_JOBS (build parallelism, default 2).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds=${1:-50}
build_dir=build-fuzz
read -r -a targets <<<"${FUZZ_TARGETS:-request-scan kv-events shm-feed prefix-hash otlp-rows}"

if ! command -v clang++ >/dev/null 2>&1; then
  echo "fuzz: SKIPPED: clang++ is not installed (apt-get install clang; Debian bookworm's clang 14 ships libFuzzer)"
  exit 0
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '#include <cstddef>\n#include <cstdint>\nextern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n' >"$probe/probe.cc"
if ! clang++ -fsanitize=fuzzer,address,undefined "$probe/probe.cc" -o "$probe/probe" 2>"$probe/err"; then
  echo "fuzz: SKIPPED: clang++ cannot link -fsanitize=fuzzer (install libclang-rt-dev):"
  cat "$probe/err"
  exit 0
fi

start=$(date +%s)
cmake -S . -B "$build_dir" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++ \
  -DKVROUTE_FUZZ=ON >/dev/null
cmake --build "$build_dir" --parallel "${FUZZ_JOBS:-2}" --target "${targets[@]/#/fuzz-}"
echo "fuzz: built ${#targets[@]} targets in $(($(date +%s) - start)) s; ${seconds} s each"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
total=0
failed=()
for target in "${targets[@]}"; do
  corpus="$build_dir/corpus/$target"
  crashes="$build_dir/crashes/$target"
  log="$build_dir/$target.log"
  mkdir -p "$corpus" "$crashes"
  seeds=()
  for kind in corpus regressions; do
    [ -d "native/fuzz/$kind/$target" ] && seeds+=("native/fuzz/$kind/$target")
  done
  status=0
  began=$(date +%s)
  "$build_dir/fuzz-$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$crashes/" "$corpus" "${seeds[@]}" >"$log" 2>&1 || status=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)
  runs=${runs:-0}
  total=$((total + runs))
  printf 'fuzz: %-13s %10d executions in %s s, corpus %s files\n' "$target" "$runs" "$(($(date +%s) - began))" \
    "$(find "$corpus" -type f | wc -l)"
  if [ "$status" -ne 0 ]; then
    failed+=("$target")
    echo "fuzz: $target FAILED (exit $status); its log, $log, ends:"
    tail -n 40 "$log"
    echo "fuzz: the input is in $crashes/: $(ls -t "$crashes" | head -1)"
    echo "fuzz: keep it as a regression case: cp it to native/fuzz/regressions/$target/, fix, re-run"
  fi
done
echo "fuzz: total ${total} executions over ${#targets[@]} targets in $(($(date +%s) - start)) s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: findings in: ${failed[*]}"
  exit 1
fi
