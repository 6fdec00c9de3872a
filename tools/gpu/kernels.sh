#!/usr/bin/env bash
# On a GPU machine (the device tool): build the CUDA parts for sm_90a, run the kernel tests on both kernel
# paths, memcheck the small cases, time the kernels (the default set, then the must-show shapes on the
# mma.sync reference path, side by side in the same run) and sweep the rates the simulator's profile is
# fitted to (kernel.csv). Logs go to $OUT. Usage: tools/gpu/kernels.sh [bench args for the default run...]
set -uo pipefail
source "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,memory.total --format=csv > "$OUT/device.txt" 2>&1
cat "$OUT/device.txt"
tools/gpu/build.sh tasp tasp_kernel_tests || exit 1
grep -E "Compiling entry|registers|spill|serialized" "$OUT/build.log" | grep -B1 -E "spill stores [1-9]|serialized" | head -12
T=build-gpu/tools/tasp
rc=0
for p in default mma; do
  TASP_ATTN_PATH=$p timeout 120 build-gpu/tests/tasp_kernel_tests > "$OUT/tests-$p.log" 2>&1 || rc=1
  echo "tests [$p]: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/tests-$p.log" | tr '\n' ' ')"
  grep -E "Failure|error|FAILED  \]|what\(\)" "$OUT/tests-$p.log" | head -6
done
timeout 300 compute-sanitizer --tool memcheck build-gpu/tests/tasp_kernel_tests \
  --gtest_filter='*OneToken*:*CausalWith*:*LongCausal*' > "$OUT/memcheck.log" 2>&1
grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | head -5
echo "== default path"
timeout 300 $T bench kernel --json "$OUT/bench.json" "$@" 2>&1 | tee "$OUT/bench.txt"
echo "== 7 pieces of 2048 keys (what hamilton on 8 GPUs receives at S=16384) vs the same keys in one buffer"
timeout 300 $T bench kernel --shape B=1,H=32,S=14336,D=128 --shape B=1,H=32,S=14336,D=128,pieces=7 \
  --shape B=1,H=32,S=14336,D=128,causal --shape B=1,H=32,S=14336,D=128,causal,pieces=7 2>&1 | tee "$OUT/bench-pieces.txt" | grep -v "^#"
echo "== TASP_ATTN_PATH=mma"
TASP_ATTN_PATH=mma timeout 300 $T bench kernel --json "$OUT/bench-mma.json" --shape B=1,H=32,S=16384,D=128 \
  --shape B=1,H=32,S=16384,D=128,causal --shape B=2,H=16,S=16384,D=64 --shape B=2,H=16,S=16384,D=64,causal 2>&1 |
  tee "$OUT/bench-mma.txt" | grep -v "^#"
tools/gpu/kernel-rates.sh "$OUT/kernel.csv" > "$OUT/kernel.txt" 2>&1 || rc=1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" --exclude logs.tar.gz . 2>/dev/null  # the device tool returns few files
exit $rc
