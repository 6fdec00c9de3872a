#!/usr/bin/env bash
# Kernel experiment on one Hopper GPU: the backward kernel tests, then the backward timed with each kernel
# variant (TASP_BWD_VARIANT, bf16 only; see kernels/attention_bwd.cu) on the issue's shapes, cuDNN beside.
# Usage: tools/gpu/bwd-variants.sh VARIANT... ; logs to $OUT.
set -uo pipefail
source "$(dirname "$0")/env.sh"
tools/gpu/build.sh tasp tasp_kernel_tests || exit 1
for v in "$@"; do
  TASP_BWD_VARIANT=$v timeout 300 build-gpu/tests/tasp_kernel_tests --gtest_filter='AttentionBwd*' > "$OUT/tests-$v.log" 2>&1
  echo "variant $v bwd tests: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/tests-$v.log" | tr '\n' ' ')"
done
T=build-gpu/tools/tasp
shapes=(--shape B=1,S=16384,H=32,D=128 --shape B=1,S=16384,H=32,D=128,causal --shape B=2,S=16384,H=16,D=64
        --shape B=2,S=16384,H=16,D=64,causal)
for round in 1 2; do
  for v in "$@"; do
    echo "== round $round TASP_BWD_VARIANT=$v"
    TASP_BWD_VARIANT=$v timeout 200 $T bench kernel --pass bwd --iters 10 "${shapes[@]}" 2>&1 | grep -v "^#"
  done
done
timeout 300 python3 tools/gpu/sdpa_bench.py "${shapes[@]}" 2>&1 | grep cudnn
