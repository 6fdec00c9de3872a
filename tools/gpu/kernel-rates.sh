#!/usr/bin/env bash
# Kernel rates of this build (tasp bench kernel --csv) over the shapes the simulator's compute profile is
# fitted to: D=128 (B=1, H=32) and D=64 (B=2, H=16), S = 2k..16k, full and causal.
# Usage: tools/gpu/kernel-rates.sh OUT.csv  (needs build-gpu/tools/tasp; the table goes to stdout)
set -uo pipefail
cd "$(dirname "$0")/../.."
shapes=()
for S in 2k 4k 8k 16k; do
  for m in "" ,causal; do shapes+=(--shape B=1,S=$S,H=32,D=128$m --shape B=2,S=$S,H=16,D=64$m); done
done
exec timeout 300 build-gpu/tools/tasp bench kernel --iters 10 --warmup 2 --csv "$1" "${shapes[@]}"
