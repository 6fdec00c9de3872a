#!/usr/bin/env bash
# Are tasp's kernels ahead of what PyTorch gives? On one Hopper GPU, tasp's attention kernels beside PyTorch SDPA's
# cuDNN and FlashAttention-2 backends on the same shapes in the same run, shape by shape and round by round
# (lib/sdpa_bench.py --tasp: both heated 2 s, so both run at the clock the power limiter settles to), with the ratios
# (lib/compare_kernels.py). TFLOP/s count 4*B*H*S*S*D forward, 2.5x that backward, halved under a causal mask.
# Usage: tools/gpu/kernels.sh [fwd|bwd|masks|all|quick] [--shape B=..,S=..,H=..,D=..[,Hkv=..][,causal] ...]
#   fwd:   the forward on 14 shapes (head dims 64-256, GQA, short and long, causal and full);
#   bwd:   forward+backward on the D=128/D=64 and GQA shapes, and what the deterministic dQ costs;
#   masks: packed documents and a sliding window against PyTorch's varlen_attn and cuDNN per document;
#   all:   the three (default); quick: two shapes each of fwd and bwd, one round.
#   ROUNDS (2): rounds over the shape list; DTYPE (bf16): fp16 for both sides. Extra --shape arguments replace the
#   mode's list (and, in bwd, leave out the deterministic dQ's A/B). Needs PyTorch.
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
mode=${1:-all}; [ $# -gt 0 ] && shift
device_info
build tasp
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
rounds=${ROUNDS:-2}

# side PASS NAME SHAPE...: tasp and SDPA on the shapes, the ratios into $OUT/NAME.md.
side() {
  local pass=$1 name=$2
  shift 2
  local args=()
  for s in "$@"; do args+=(--shape "$s"); done
  echo "== $name ($pass, $rounds rounds)"
  timeout 900 python3 tools/gpu/lib/sdpa_bench.py --pass "$pass" --rounds "$rounds" --dtype "${DTYPE:-bf16}" --tasp "$T bench kernel" \
    --tasp-json "$OUT/$name-tasp.json" --json "$OUT/$name-sdpa.json" "${args[@]}" > "$OUT/$name.txt" 2>&1
  python3 tools/gpu/lib/compare_kernels.py "$OUT/$name-tasp.json" "$OUT/$name-sdpa.json" --md "$OUT/$name.md" | tee -a "$OUT/summary.md"
}
fwd_shapes=(B=1,S=16384,H=32,D=128 B=1,S=16384,H=32,D=128,causal B=2,S=16384,H=16,D=64 B=2,S=16384,H=16,D=64,causal
            B=1,S=65536,H=8,D=128,causal B=8,S=2048,H=32,D=128,causal B=4,S=4096,H=32,D=128,causal
            B=1,S=12000,H=32,D=128,causal B=1,S=16384,H=32,Hkv=8,D=128,causal B=1,S=16384,H=64,Hkv=8,D=128,causal
            B=1,S=16384,H=16,D=256 B=1,S=16384,H=16,D=256,causal B=1,S=16384,H=32,D=80,causal B=1,S=16384,H=32,D=96,causal)
bwd_shapes=(B=1,S=16384,H=32,D=128 B=1,S=16384,H=32,D=128,causal B=2,S=16384,H=16,D=64 B=2,S=16384,H=16,D=64,causal
            B=1,S=16384,H=32,Hkv=8,D=128,causal B=4,S=6144,H=16,Hkv=2,D=128,causal)
user=()
while [ $# -gt 0 ]; do [ "$1" = --shape ] && user+=("$2") && shift; shift; done
[ ${#user[@]} -gt 0 ] && fwd_shapes=("${user[@]}") bwd_shapes=("${user[@]}")
if [ "$mode" = quick ]; then
  rounds=1 fwd_shapes=(B=1,S=16384,H=32,D=128 B=8,S=2048,H=32,D=128,causal) bwd_shapes=(B=1,S=16384,H=32,D=128,causal B=2,S=16384,H=16,D=64)
fi
case $mode in fwd|all|quick) side fwd fwd "${fwd_shapes[@]}" ;; esac
case $mode in bwd|all|quick) side fwd+bwd bwd "${bwd_shapes[@]}" ;; esac

if { [ "$mode" = bwd ] || [ "$mode" = all ]; } && [ ${#user[@]} -eq 0 ]; then
  echo "== what the deterministic dQ costs (the backward with and without --deterministic, taking turns, two rounds)"
  args=(); for s in "${bwd_shapes[@]:0:4}"; do args+=(--shape "$s"); done
  OUT="$OUT" AB_TAG=deterministic tools/gpu/ab.sh bwd 2 "--deterministic" "${args[@]}" | tee -a "$OUT/summary.md"
fi

if [ "$mode" = masks ] || [ "$mode" = all ]; then
  echo "== packed documents and a sliding window, S=65536 H=32 D=128, fwd+bwd: tasp beside varlen_attn and cuDNN per document"
  D=20000+4096+777+15000+8192+10000+2500+4971
  timeout 300 $T bench kernel --shape B=1,S=65536,H=32,D=128,causal,docs=$D --shape B=1,S=65536,H=32,D=128,causal,window=4096 \
    --pass fwd+bwd --iters 5 --warmup 2 --heat-ms 2000 2>&1 | grep -v "^#" | tee -a "$OUT/masks.txt"
  timeout 200 python3 tools/gpu/lib/varlen_bench.py --docs $D --iters 5 2>&1 | tee -a "$OUT/masks.txt"
  timeout 100 python3 tools/gpu/lib/varlen_bench.py --docs 65536 --window 4096 --iters 5 2>&1 | tee -a "$OUT/masks.txt"
fi
exit 0
