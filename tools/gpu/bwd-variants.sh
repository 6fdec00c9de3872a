#!/usr/bin/env bash
# Kernel experiment on one Hopper GPU: the backward kernel tests, then the backward timed with each way of
# writing dQ (TASP_BWD_DQ = bulk | atomic | none) on the issue's shapes. Logs to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/tasp-out}
mkdir -p "$OUT"
tools/gpu/build.sh tasp tasp_kernel_tests || exit 1
grep -A2 "Compiling entry.*bwd.*ELi0E" "$OUT/build.log" | grep -E "registers|spill" | head -4
timeout 300 build-gpu/tests/tasp_kernel_tests --gtest_filter='AttentionBwd*' > "$OUT/tests.log" 2>&1
echo "bwd tests: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/tests.log" | tr '\n' ' ')"
grep -E "Failure|FAILED  \]|what\(\)|Expected|Which|relative" "$OUT/tests.log" | head -20
T=build-gpu/tools/tasp
shapes=(--shape B=1,S=16384,H=32,D=128 --shape B=1,S=16384,H=32,D=128,causal --shape B=2,S=16384,H=16,D=64
        --shape B=2,S=16384,H=16,D=64,causal "$@")
for m in bulk atomic none; do
  echo "== TASP_BWD_DQ=$m"
  TASP_BWD_DQ=$m timeout 200 $T bench kernel --pass bwd --iters 10 "${shapes[@]}" 2>&1 | grep -v "^#"
done
