#!/usr/bin/env bash
# After a change to executor/ or kernels/ (device tool, nvidia-h200-x2): GPU unit tests, every scheme's
# fwd+bwd checked on the cuda backend, head-parallel plans (ulysses) checked there too, and one configuration timed
# beside the PyTorch ring on cuDNN and FA2 kernels (tools/gpu/torch_ring.py) in the same run, with ratios; packed
# documents and a window checked, and their kernels timed beside PyTorch's varlen_attn and cuDNN per document.
# Usage: tools/gpu/regression.sh [ITERS]      Logs to $OUT.
set -uo pipefail
source "$(dirname "$0")/env.sh"
ITERS=${1:-5}
N=$(nvidia-smi -L | wc -l)
nvidia-smi -L | tee "$OUT/device.txt"
tools/gpu/build.sh tasp tasp_kernel_tests tasp_executor_tests || exit 1
T=build-gpu/tools/tasp

echo "== 1. GPU unit tests"
ctest --test-dir build-gpu -L gpu --timeout 300 2>&1 | grep -E "tests passed|FAILED|Failed|Total Test time" | tee "$OUT/gpu-tests.txt"

echo "== 2. every scheme fwd+bwd on the cuda backend vs fp64 / one GPU"
# the third shape's S does not split evenly (shards and pieces differ by a token)
for shape in "B=1,S=$((N * 2 * 150)),H=4,Hkv=2,D=64" "B=1,S=$((N * 2 * 1000)),H=16,Hkv=2,D=128" "B=2,S=$((N * 2 * 1000 + 7)),H=8,Hkv=2,D=128"; do
  for mask in "" ",causal"; do
    for s in ring zigzag allgather hamilton; do
      [ "$s" = zigzag ] && [ -z "$mask" ] && continue
      $T run --backend cuda -t complete:$N -s $s -w "$shape$mask" --pass fwd+bwd --check --iters 2 --warmup 1 2>&1 |
        grep -E "PASS|FAIL|error" | sed "s/^/$s $shape$mask: /" | tee -a "$OUT/check.log"
    done
  done
done

echo "== 3. head-parallel plans on the cuda backend (all-to-alls; tools/gpu/heads.sh has more)"
for w in "B=2,S=$((N * 300)),H=8,Hkv=2,D=64,causal" "B=1,S=$((N * 1000 + 2 * N)),H=8,Hkv=1,D=128" "B=1,S=$((N * 1000 + 3)),H=8,Hkv=2,D=128,causal"; do
  $T run --backend cuda -t complete:$N -s ulysses -w "$w" --pass fwd+bwd --check --iters 2 --warmup 1 2>&1 |
    grep -E "PASS|FAIL|error" | sed "s/^/ulysses $w: /" | tee -a "$OUT/check.log"
done

echo "== 4. one configuration, fwd+bwd: tasp beside the PyTorch ring (cuDNN, FA2)"
W="B=1,H=32,D=128,S=65536,causal"
for s in zigzag allgather hamilton; do
  $T run --backend cuda -t complete:$N -s $s -w "$W" --pass fwd+bwd --iters "$ITERS" --warmup 2 --heat-ms 1000 2>&1 |
    grep -oE "median [0-9.]+ us" | sed "s/^/tasp $s: /" | tee -a "$OUT/side-by-side.txt"
done
timeout 300 python3 tools/gpu/torch_ring.py -w "$W" --iters "$ITERS" 2>&1 | tee -a "$OUT/side-by-side.txt"

echo "== 5. masks: documents and a window checked on the cuda backend, and timed on one GPU beside PyTorch"
for w in "B=2,S=8192,H=8,D=128,causal,docs=3000+1+4000+1191" "B=1,S=8191,H=8,Hkv=2,D=64,causal,window=300"; do
  for s in ring hamilton ulysses; do
    $T run --backend cuda -t complete:$N -s $s -w "$w" --pass fwd+bwd --check --iters 2 --warmup 1 2>&1 |
      grep -E "PASS|FAIL|error" | sed "s/^/$s $w: /" | tee -a "$OUT/check.log"
  done
done
D=20000+4096+777+15000+8192+10000+2500+4971
CUDA_VISIBLE_DEVICES=0 $T bench kernel --shape B=1,S=65536,H=32,D=128,causal,docs=$D --shape B=1,S=65536,H=32,D=128,causal,window=4096 \
  --pass fwd+bwd --iters "$ITERS" --warmup 2 2>&1 | grep -v "^#" | tee -a "$OUT/masks.txt"
CUDA_VISIBLE_DEVICES=0 timeout 120 python3 tools/gpu/varlen_bench.py --docs $D --iters "$ITERS" 2>&1 | tee -a "$OUT/masks.txt"
CUDA_VISIBLE_DEVICES=0 timeout 60 python3 tools/gpu/varlen_bench.py --docs 65536 --window 4096 --iters "$ITERS" 2>&1 | tee -a "$OUT/masks.txt"
