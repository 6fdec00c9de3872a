#!/usr/bin/env bash
# Fuzzes the loaders (tests/fuzz/fuzz_loaders.cpp) with libFuzzer: clang, coverage and AddressSanitizer,
# LeakSanitizer and UndefinedBehaviorSanitizer over the planner and simulator code, each target for SECONDS
# (default 20) from the corpus in tests/fuzz/corpus/<target> (read-only: new inputs go to build-cpu/corpus). The
# targets come from tools/cpu-check.sh's build (build-cpu/: clang, sanitizers, libFuzzer), built here if missing.
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
TARGETS=${*:-topology_yaml plan_json plan_yaml workload profile_yaml timeline_json docs_text runs_csv samples_csv}
tools/cpu-check.sh --build-only
B=build-cpu
rc=0
for t in $TARGETS; do
  mkdir -p $B/corpus/$t $B/findings/$t
  log=$B/$t.log
  if ! UBSAN_OPTIONS=print_stacktrace=1 $B/tests/fuzz/fuzz_$t $B/corpus/$t tests/fuzz/corpus/$t \
       -max_total_time="$SECONDS_EACH" "${limit[@]}" -timeout=5 -rss_limit_mb=2048 -malloc_limit_mb=1024 -max_len=65536 \
       -artifact_prefix=$B/findings/$t/ -print_final_stats=1 > "$log" 2>&1; then
    echo "fuzz $t: FAILED (see $log and $B/findings/$t/)"
    grep -E "ERROR|SUMMARY|==[0-9]+==|unexpected|Test unit" "$log" | head -8
    rc=1
  fi
  echo "fuzz $t: $(grep -E 'stat::number_of_executed_units' "$log" | awk '{print $2}') executions in \
$(grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$log" | grep -oE '[0-9]+ second' || echo "${SECONDS_EACH} s"), \
$(grep -E 'stat::peak_rss_mb' "$log" | awk '{print $2}') MB peak"
done
exit $rc
