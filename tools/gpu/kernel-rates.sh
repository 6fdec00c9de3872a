#!/usr/bin/env bash
# Kernel rates of this build (tasp bench kernel --csv) over the shapes the simulator's compute profile is
# fitted to: D=128 (B=1, H=32) and D=64 (B=2, H=16), S = 2k..16k, full and causal; PASS fwd (default), bwd or
# fwd+bwd (backward rows are kind attention_bwd).
# Usage: tools/gpu/kernel-rates.sh OUT.csv [PASS]  (needs build-gpu/tools/tasp; the table goes to stdout)
set -uo pipefail
cd "$(dirname "$0")/../.."
shapes=()
for S in 2k 4k 8k 16k; do
  for m in "" ,causal; do shapes+=(--shape B=1,S=$S,H=32,D=128$m --shape B=2,S=$S,H=16,D=64$m); done
done
exec timeout 400 build-gpu/tools/tasp bench kernel --pass "${2:-fwd}" --iters 10 --warmup 2 --csv "$1" "${shapes[@]}"
