#!/usr/bin/env bash
# Issue 13's side-by-side run on one Hopper GPU (the device tool): build, the kernel tests with and without
# the forward's intra-warpgroup overlap, memcheck of the small cases, then `tasp bench kernel` (forward) beside
# PyTorch SDPA (cuDNN, FA2) on the same shapes in the same run, shape by shape, with the ratios (compare_kernels.py).
# Usage: tools/gpu/fwd-kernels.sh [quick|bench] [extra --shape args...]
#   quick: tests of the default path only, no memcheck, no overlap-off bench.
#   bench: the side-by-side only, with the build-gpu/ already there (after another script's build).
#   TASP_ARGS: more `tasp bench kernel` options for the side-by-side (e.g. "--out final": rows in bf16, as SDPA's).
set -uo pipefail
source "$(dirname "$0")/env.sh"
quick=0 bench=0
[ "${1:-}" = quick ] && quick=1 && shift
[ "${1:-}" = bench ] && quick=1 bench=1 && shift
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
[ $bench = 1 ] || tools/gpu/build.sh tasp tasp_kernel_tests || exit 1
grep -A2 "Compiling entry.*fwd_sm90" "$OUT/build.log" | grep -E "spill" | sort | uniq -c
grep -c "C75[0-9][0-9]" "$OUT/build.log" | sed 's/^/ptxas performance warnings: /'
T=build-gpu/tools/tasp
tests() {  # $1: TASP_FWD_OVERLAP
  TASP_FWD_OVERLAP=$1 timeout 300 build-gpu/tests/tasp_kernel_tests > "$OUT/tests-overlap$1.log" 2>&1
  echo "tests (overlap=$1): $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/tests-overlap$1.log" | tr '\n' ' ')"
  grep -E "Failure|FAILED  \]|what\(\)|relative" "$OUT/tests-overlap$1.log" | head -20
}
[ $bench = 1 ] || tests 1
if [ $quick = 0 ]; then
  tests 0
  timeout 300 compute-sanitizer --tool memcheck build-gpu/tests/tasp_kernel_tests \
    --gtest_filter='AttentionGpu.*:-*Long*' > "$OUT/memcheck.log" 2>&1
  grep -E "ERROR SUMMARY" "$OUT/memcheck.log" | head -3
fi
shapes=(--shape B=1,S=16384,H=32,D=128 --shape B=1,S=16384,H=32,D=128,causal
        --shape B=2,S=16384,H=16,D=64 --shape B=2,S=16384,H=16,D=64,causal
        --shape B=1,S=65536,H=8,D=128,causal --shape B=8,S=2048,H=32,D=128,causal
        --shape B=4,S=4096,H=32,D=128,causal --shape B=1,S=12000,H=32,D=128,causal
        --shape B=1,S=16384,H=32,Hkv=8,D=128,causal --shape B=1,S=16384,H=64,Hkv=8,D=128,causal
        --shape B=1,S=16384,H=16,D=256 --shape B=1,S=16384,H=16,D=256,causal
        --shape B=1,S=16384,H=32,D=80,causal --shape B=1,S=16384,H=32,D=96,causal "$@")
# tasp and SDPA shape by shape (sdpa_bench.py --tasp), ROUNDS times over the list: the same GPU warmth for both.
TASP_FWD_OVERLAP=1 timeout 600 python3 tools/gpu/sdpa_bench.py --pass fwd --rounds "${ROUNDS:-2}" --tasp "$T bench kernel ${TASP_ARGS:-}" \
  --tasp-json "$OUT/tasp.json" --json "$OUT/sdpa.json" "${shapes[@]}" 2>&1 | tee "$OUT/bench-sdpa.txt"
[ $quick = 0 ] && TASP_FWD_OVERLAP=0 timeout 300 $T bench kernel --json "$OUT/tasp-no-overlap.json" "${shapes[@]}" 2>&1 |
  tee "$OUT/bench-tasp-no-overlap.txt"
python3 tools/gpu/compare_kernels.py "$OUT/tasp.json" "$OUT/sdpa.json" --md "$OUT/compare.md"
[ -f "$OUT/tasp-no-overlap.json" ] && python3 tools/gpu/compare_kernels.py "$OUT/tasp-no-overlap.json" "$OUT/sdpa.json" --md "$OUT/compare-no-overlap.md"
exit 0
