#!/usr/bin/env bash
# Fuzzes the loaders (tests/fuzz/fuzz_loaders.cpp) with libFuzzer: clang, coverage and AddressSanitizer,
# LeakSanitizer and UndefinedBehaviorSanitizer over the planner and simulator code, each target for SECONDS
# (default 20) from the corpus in tests/fuzz/corpus/<target> (read-only: new inputs go to build-fuzz/corpus).
# A crash, leak, hang (-timeout), oversized allocation or sanitizer report fails the run (exit 1).
# Usage: tools/fuzz.sh [SECONDS] [TARGET...]
#        tools/fuzz.sh --ci      (what CI runs: 20000 inputs per target from a fixed seed, the same every time)
set -euo pipefail
cd "$(dirname "$0")/.."
limit=()
if [ "${1:-}" = "--ci" ]; then
  limit=(-runs=20000 -seed=1)
  SECONDS_EACH=120
else
  SECONDS_EACH=${1:-20}
fi
shift || true
TARGETS=${*:-topology_yaml plan_json plan_yaml workload profile_yaml}
if ! command -v clang++ > /dev/null; then
  echo "fuzz: clang++ not found (tools/install-deps.sh installs it)"; exit 1
fi
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -g -O1"
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DTASP_WITH_CUDA=OFF -DTASP_FUZZ=ON -DCMAKE_CXX_FLAGS="$flags" > /dev/null
targets=()
for t in $TARGETS; do targets+=(fuzz_$t); done
cmake --build build-fuzz --target "${targets[@]}" -j "$(nproc)" > build-fuzz/build.log 2>&1 || { tail -30 build-fuzz/build.log; exit 1; }
rc=0
for t in $TARGETS; do
  mkdir -p build-fuzz/corpus/$t build-fuzz/findings/$t
  log=build-fuzz/$t.log
  if ! UBSAN_OPTIONS=print_stacktrace=1 build-fuzz/tests/fuzz/fuzz_$t build-fuzz/corpus/$t tests/fuzz/corpus/$t \
       -max_total_time="$SECONDS_EACH" "${limit[@]}" -timeout=5 -rss_limit_mb=2048 -malloc_limit_mb=1024 -max_len=65536 \
       -artifact_prefix=build-fuzz/findings/$t/ -print_final_stats=1 > "$log" 2>&1; then
    echo "fuzz $t: FAILED (see $log and build-fuzz/findings/$t/)"
    grep -E "ERROR|SUMMARY|==[0-9]+==|unexpected|Test unit" "$log" | head -8
    rc=1
  fi
  echo "fuzz $t: $(grep -E 'stat::number_of_executed_units' "$log" | awk '{print $2}') executions in \
$(grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$log" | grep -oE '[0-9]+ second' || echo "${SECONDS_EACH} s"), \
$(grep -E 'stat::peak_rss_mb' "$log" | awk '{print $2}') MB peak"
done
exit $rc
