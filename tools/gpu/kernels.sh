#!/usr/bin/env bash
# On a GPU machine (the device tool): build the CUDA parts for sm_90, run the kernel tests, memcheck the
# small cases, and time the kernels. Logs and JSON go to $OUT. Usage: tools/gpu/kernels.sh [bench args...]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/tasp-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,memory.total --format=csv > "$OUT/device.txt" 2>&1
cat "$OUT/device.txt"
tools/gpu/build.sh tasp tasp_kernel_tests || exit 1
grep -E "registers|spill" "$OUT/build.log" | grep -B1 -A0 "spill" | head -12
build-gpu/tests/tasp_kernel_tests > "$OUT/tests.log" 2>&1; rc=$?
grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|error" "$OUT/tests.log" | head -30
compute-sanitizer --tool memcheck build-gpu/tests/tasp_kernel_tests --gtest_filter='*OneToken*:*CausalWith*' \
  > "$OUT/memcheck.log" 2>&1
grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | head -5
build-gpu/tools/tasp bench kernel --json "$OUT/bench.json" "$@" 2>&1 | tee "$OUT/bench.txt"
exit $rc
