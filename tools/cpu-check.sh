#!/usr/bin/env bash
# The CPU build a machine without CUDA gets (-DTASP_WITH_CUDA=OFF), under AddressSanitizer and
# UndefinedBehaviorSanitizer (clang), with the loaders' libFuzzer targets: one build into build-cpu/ serves the
# CPU tests (run here) and tools/fuzz.sh. Any sanitizer report fails its test.
# Usage: tools/cpu-check.sh [--build-only]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang++ > /dev/null || { echo "cpu-check: clang++ not found (tools/install-deps.sh installs it)"; exit 1; }
cmake -S . -B build-cpu -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_CXX_FLAGS_DEBUG="-O1 -gline-tables-only" -DTASP_WITH_CUDA=OFF -DTASP_SANITIZE=ON -DTASP_FUZZ=ON > /dev/null
cmake --build build-cpu -j "$(nproc)" > build-cpu/build.log 2>&1 || { tail -40 build-cpu/build.log; exit 1; }
[ "${1:-}" = --build-only ] && exit 0
# Each test binary once (a process per test, as ctest runs them, costs the sanitizers' start-up 321 times), in
# parallel; then the committed fuzz corpus replayed through each libFuzzer target. The cpu backend's runs on 12 and 16
# ranks are left to the release build's suite (tools/test.sh): under the sanitizers they took 150 of the executor
# tests' 190 s, on code the smaller rank counts run too.
export UBSAN_OPTIONS=print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1
t0=$(date +%s)
pids=()
for b in build-cpu/tests/tasp_*_tests; do
  args=(--gtest_brief=1)
  [ "${b##*/}" = tasp_executor_tests ] && args+=(--gtest_filter='-*complete_16_*:*complete_12_*:*cluster_3x4_*')
  "$b" "${args[@]}" > "$b.log" 2>&1 &
  pids+=("$!:$b")
done
fail=0
for p in "${pids[@]}"; do
  wait "${p%%:*}" || { tail -40 "${p#*:}.log"; echo "FAILED: ${p#*:}"; fail=1; }
done
[ $fail = 0 ] || exit 1
for t in topology_yaml plan_json plan_yaml workload profile_yaml; do
  f=build-cpu/tests/fuzz/fuzz_$t
  "$f" -runs=0 tests/fuzz/corpus/$t > "$f.log" 2>&1 || { tail -20 "$f.log"; echo "FAILED: $f"; exit 1; }
done
echo "cpu-check: every CPU test and the fuzz corpus pass under ASan+UBSan, CUDA off ($(( $(date +%s) - t0 )) s)"
