#!/usr/bin/env bash
# On one Hopper GPU: where the backward kernel's tile time goes. Builds the kernel with its phase clocks
# (-DTASP_BWD_TRACE, tools/gpu/bwd_trace.py reads them) beside the plain build, runs the backward on the
# standard shapes and prints each warpgroup's phase cycles, the tile period and the warpgroups' skew.
#   VARIANTS="name:-DFLAG=1 name2:-DFLAG=0": each flag set built plain and traced, traced, and A/B'd against the
#   plain build (tools/gpu/ab.sh, ROUNDS=2 rounds).
#   BASE_PATCH=file (git diff BASE -- kernels/ > file): the base built too (tools/gpu/build-base.sh) and A/B'd.
#   AB_ENV="VAR=1|VAR=2": environment variants of the plain build in the A/B too.
#   TESTS=1: the plain build's backward GPU tests run first (a variant that breaks them is not timed in vain).
# Everything goes to $OUT/trace.tar.gz (the device tool returns few files), the summaries also to stdout.
# Usage: tools/gpu/bwd-trace.sh
set -uo pipefail
source "$(dirname "$0")/env.sh"
source tools/gpu/trace-builds.sh
trace_builds -DTASP_BWD_TRACE
if [ "${TESTS:-0}" = 1 ]; then
  timeout 300 build-gpu/tests/tasp_kernel_tests --gtest_filter='AttentionBwd*' > "$OUT/tests.log" 2>&1
  echo "tests: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/tests.log" | tr '\n' ' ')"
  grep -E "Failure|FAILED  \]|what\(\)" "$OUT/tests.log" | head -10
fi
shapes=(--shape B=1,S=16384,H=32,D=128 --shape B=1,S=16384,H=32,D=128,causal --shape B=2,S=16384,H=16,D=64
        --shape B=2,S=16384,H=16,D=64,causal)
names=(d128 d128c d64 d64c)
for b in "${builds[@]}"; do
  name=${b%%:*}
  case $name in *trace) ;; *) continue ;; esac
  for i in 0 1 2 3; do
    TASP_BWD_TRACE_FILE="$OUT/$name-${names[$i]}.bin" timeout 120 build-$name/tools/tasp bench kernel --pass bwd --iters 3 \
      --warmup 1 --heat-ms 300 "${shapes[$((2 * i))]}" "${shapes[$((2 * i + 1))]}" > "$OUT/$name-${names[$i]}.txt" 2>&1
    python3 tools/gpu/bwd_trace.py "$OUT/$name-${names[$i]}.bin" | tee -a "$OUT/trace-summary.txt"
  done
done
spec=$(ab_variants)
[ -n "${AB_ENV:-}" ] && spec+="${spec:+|}$AB_ENV"
[ -n "$spec" ] && OUT="$OUT" AB_TAG=trace tools/gpu/ab.sh bwd "${ROUNDS:-2}" "$spec" "${shapes[@]}" | tee "$OUT/ab-summary.txt"
tar -czf "$RES/trace.tar.gz" -C "$OUT" .
