#!/usr/bin/env bash
# Session 22 (one H200): the workspace fix checked (kernel tests, the mixed bench that read freed plans), the
# kernel profile swept again, and where the forward's power goes at D=128: the SM clock and board power of the
# default build beside one whose K/V copies stop after the first stages (-DTASP_FWD_NOLOAD) and 128-key tiles.
# Usage: tools/gpu/s22-power.sh   (writes $OUT/s22.tar.gz)
set -uo pipefail
source "$(dirname "$0")/env.sh"
R=$OUT
export OUT=$(mktemp -d)
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader > "$OUT/device.txt"
(tools/gpu/build.sh tasp tasp_kernel_tests; echo "build: rc $?") &
(mkdir -p "$OUT/noload"; OUT="$OUT/noload" CUDA_FLAGS=-DTASP_FWD_NOLOAD BUILD_DIR=build-noload tools/gpu/build.sh tasp; echo "build noload: rc $?") &
wait
T=build-gpu/tools/tasp
timeout 240 build-gpu/tests/tasp_kernel_tests > "$OUT/tests.log" 2>&1
grep -E '^\[  (PASSED|FAILED) |FAILED  \]' "$OUT/tests.log"
timeout 60 $T bench kernel --pass fwd+bwd --heat-ms 300 --mix --iters 3 --shape B=1,S=8192,H=32,D=128 \
  --shape B=2,S=8192,H=16,D=64 > "$OUT/mix.txt" 2>&1; echo "mixed bench: rc $?"; tail -5 "$OUT/mix.txt"
t0=$(date +%s); tools/gpu/kernel-profile.sh "$OUT/prof"; echo "profile: $(( $(date +%s) - t0 )) s, $(wc -l < "$OUT/prof/kernel.csv") rows"
grep -i "error" "$OUT/prof/kernel.txt" | head -3
CLOCKS=1 AB_TAG=d128 tools/gpu/ab.sh fwd 2 'BIN=build-noload/tools/tasp|TASP_FWD_BN=128' --shape B=1,S=16384,H=32,D=128
cat "$OUT/ab-d128-clocks.txt"
CLOCKS=1 AB_TAG=gqa tools/gpu/ab.sh fwd 1 'BIN=build-noload/tools/tasp' --shape B=1,S=16384,H=32,Hkv=8,D=128,causal
cat "$OUT/ab-gqa-clocks.txt"
tar -czf "$R/s22.tar.gz" -C "$OUT" .
