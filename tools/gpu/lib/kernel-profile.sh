#!/usr/bin/env bash
# Kernel rates of this build for the simulator's compute profile (tasp calibrate --fit): cold (a short burst)
# and hot (each kernel after 2 s of the same work, alone and with forward and backward taking turns: the power
# limiter settles over about a second, lib/sdpa_bench.py).
# D=128 (B=1, H=32) and D=64 (B=2, H=16) forward and backward, S = 2k..32k; head dims 80, 96 (B=1, H=32) and 256
# (B=1, H=16), S = 2k..16k, forward and backward; GQA (D=128 H=32 over Hkv = 8 and 4, B=4 H=16 over 4 and 2 at
# S=6k; D=64 B=2 H=16 over 4 and 2), forward and backward, cold and hot, each beside its MHA shape in the same
# file (the fit's GQA curves are ratios to those). Writes R/kernel-{cold,hot-fwd,hot-bwd,hot-mix,gqa-cold,gqa-hot}.csv,
# the merged R/kernel.csv and the tables in R/kernel.txt.
# Usage: tools/gpu/lib/kernel-profile.sh R   (needs build-gpu/tools/tasp)
#   OTHER_DIMS_ONLY=1: the head dims 80, 96 and 256 alone (R/kernel-other.csv: cold, hot and mixed), for a profile
#   whose D=64 and D=128 rates come from an earlier sweep.
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$1
mkdir -p "$R"
T=build-gpu/tools/tasp
both=() other=() hot=() hot_other=()
for S in 2k 4k 8k 16k 32k; do
  for m in "" ,causal; do both+=(--shape B=1,S=$S,H=32,D=128$m --shape B=2,S=$S,H=16,D=64$m); done
done
for S in 2k 4k 8k 16k; do
  for m in "" ,causal; do other+=(--shape B=1,S=$S,H=32,D=80$m --shape B=1,S=$S,H=32,D=96$m --shape B=1,S=$S,H=16,D=256$m); done
done
for S in 8k 16k; do
  for m in "" ,causal; do hot+=(--shape B=1,S=$S,H=32,D=128$m --shape B=2,S=$S,H=16,D=64$m); done
done
gqa=()
for m in "" ,causal; do
  for S in 8k 16k; do
    gqa+=(--shape B=1,S=$S,H=32,D=128$m --shape B=1,S=$S,H=32,Hkv=8,D=128$m --shape B=1,S=$S,H=32,Hkv=4,D=128$m)
    gqa+=(--shape B=2,S=$S,H=16,D=64$m --shape B=2,S=$S,H=16,Hkv=4,D=64$m --shape B=2,S=$S,H=16,Hkv=2,D=64$m)
  done
  gqa+=(--shape B=4,S=6k,H=16,D=128$m --shape B=4,S=6k,H=16,Hkv=4,D=128$m --shape B=4,S=6k,H=16,Hkv=2,D=128$m)
done
for m in "" ,causal; do hot_other+=(--shape B=1,S=16k,H=32,D=80$m --shape B=1,S=16k,H=32,D=96$m --shape B=1,S=16k,H=16,D=256$m); done
# The head dims 80, 96 and 256: cold, hot alone (each pass) and mixed, into R/kernel-other.csv.
other_dims() {
  timeout 100 $T bench kernel --accumulate --pass fwd+bwd --iters 10 --warmup 2 --csv "$R/kernel-other-cold.csv" "${other[@]}" >> "$R/kernel.txt" 2>&1
  for pass in fwd bwd; do
    timeout 100 $T bench kernel --accumulate --pass $pass --iters 10 --warmup 2 --heat-ms 2000 --csv "$R/kernel-other-hot-$pass.csv" \
      "${hot_other[@]}" >> "$R/kernel.txt" 2>&1
  done
  timeout 100 $T bench kernel --accumulate --pass fwd+bwd --iters 10 --warmup 2 --heat-ms 2000 --mix --csv "$R/kernel-other-hot-mix.csv" \
    "${hot_other[@]}" >> "$R/kernel.txt" 2>&1
  { cat "$R/kernel-other-cold.csv"; for f in hot-fwd hot-bwd hot-mix; do tail -n +2 "$R/kernel-other-$f.csv"; done; } > "$R/kernel-other.csv"
}
: > "$R/kernel.txt"
if [ "${OTHER_DIMS_ONLY:-0}" = 1 ]; then other_dims; exit 0; fi
timeout 200 $T bench kernel --accumulate --pass fwd+bwd --iters 10 --warmup 2 --csv "$R/kernel-cold.csv" "${both[@]}" >> "$R/kernel.txt" 2>&1
timeout 100 $T bench kernel --pass fwd --iters 10 --warmup 2 --heat-ms 2000 --csv "$R/kernel-hot-fwd.csv" "${hot[@]}" >> "$R/kernel.txt" 2>&1
timeout 100 $T bench kernel --accumulate --pass bwd --iters 10 --warmup 2 --heat-ms 2000 --csv "$R/kernel-hot-bwd.csv" "${hot[@]}" >> "$R/kernel.txt" 2>&1
timeout 150 $T bench kernel --accumulate --pass fwd+bwd --iters 10 --warmup 2 --heat-ms 2000 --mix --csv "$R/kernel-hot-mix.csv" "${hot[@]}" >> "$R/kernel.txt" 2>&1
timeout 100 $T bench kernel --accumulate --pass fwd+bwd --iters 10 --warmup 2 --csv "$R/kernel-gqa-cold.csv" "${gqa[@]}" >> "$R/kernel.txt" 2>&1
timeout 250 $T bench kernel --accumulate --pass fwd+bwd --iters 10 --warmup 2 --heat-ms 1500 --csv "$R/kernel-gqa-hot.csv" "${gqa[@]}" >> "$R/kernel.txt" 2>&1
other_dims
{ cat "$R/kernel-cold.csv"; for f in hot-fwd hot-bwd hot-mix gqa-cold gqa-hot other; do tail -n +2 "$R/kernel-$f.csv"; done; } > "$R/kernel.csv"
