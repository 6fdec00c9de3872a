#!/usr/bin/env bash
# Packed documents and sliding windows on the GPU (issue 14; device tool): the kernels' mask tests, masked
# workloads through every scheme on the cuda backend checked on 2 GPUs, kernel timings on one GPU (a 4096
# window and 8 packed documents against full causal, S=131072, H=32, D=128), and masked workloads measured
# beside the simulator's prediction on 2 GPUs.
# Usage: tools/gpu/masks.sh checks|kernel|table [ITERS]      Logs to $OUT; results also to stdout.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/tasp-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
WHAT=$1; ITERS=${2:-5}
N=$(nvidia-smi -L | wc -l)
nvidia-smi -L > "$OUT/device.txt"
tools/gpu/build.sh tasp tasp_kernel_tests || exit 1
T=build-gpu/tools/tasp
# 8 documents of mixed lengths packed into 131072 tokens
DOCS8=40000+8192+777+30000+16384+20000+5000+10719

case $WHAT in
checks)
  echo "== kernel tests: documents and windows (Hopper path, then the mma.sync path), then the whole suite"
  build-gpu/tests/tasp_kernel_tests --gtest_filter='*DocumentsAndWindows*' 2>&1 | grep -E "OK|FAILED|Failure|error" | head -20
  TASP_ATTN_PATH=mma build-gpu/tests/tasp_kernel_tests --gtest_filter='AttentionGpu.DocumentsAndWindows' 2>&1 | grep -E "OK|FAILED" | head -3
  build-gpu/tests/tasp_kernel_tests 2>&1 | grep -E "PASSED|FAILED" | head -5
  echo "== masked workloads fwd+bwd on the cuda backend, $N GPUs, vs fp64 (or the whole problem on one GPU)"
  for w in "B=1,S=3001,H=4,Hkv=2,D=64,causal,window=100" "B=2,S=2500,H=4,D=128,causal,docs=700+1+1200+599" \
           "B=1,S=2048,H=4,Hkv=1,D=64,window=300:40" "B=1,S=2400,H=8,Hkv=2,D=128,docs=1000+1400,window=256:0" \
           "B=1,S=$((N * 8192)),H=16,Hkv=4,D=128,causal,docs=3000+$((N * 8192 - 3000))" "B=1,S=$((N * 8192)),H=16,D=128,causal,window=1000"; do
    for s in ring zigzag allgather hamilton ulysses; do
      case $w in *causal*) ;; *) [ $s = zigzag ] && continue ;; esac
      $T run --backend cuda -t complete:$N -s $s -w "$w" --pass fwd+bwd --check --iters 2 --warmup 1 2>&1 |
        grep -E "PASS|FAIL|rror" | sed "s/^/$s $w: /" | tee -a "$OUT/check.log"
    done
  done
  ;;
kernel)
  echo "== kernels on one GPU: full causal, window 4096, $DOCS8 packed, each document alone (median of $ITERS, heated 300 ms)"
  shapes=(--shape B=1,S=131072,H=32,D=128,causal --shape B=1,S=131072,H=32,D=128,causal,window=4096
          --shape B=1,S=131072,H=32,D=128,causal,docs=$DOCS8)
  for d in ${DOCS8//+/ }; do shapes+=(--shape B=1,S=$d,H=32,D=128,causal); done
  CUDA_VISIBLE_DEVICES=0 $T bench kernel "${shapes[@]}" --pass fwd+bwd --iters "$ITERS" --warmup 2 --heat-ms 300 \
    --json "$OUT/kernel.json" | tee "$OUT/kernel.txt"
  python3 - "$OUT/kernel.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
for p in ("fwd", "bwd"):
    r = [x for x in rows if x["pass"] == p]
    full = next(x for x in r if x["S"] == 131072 and x["mask"] == "causal")
    win = next(x for x in r if x["mask"] == "window")
    docs = next(x for x in r if x["mask"] == "docs")
    alone = sum(x["ms"] for x in r if x["S"] < 131072)
    at_rate = docs["pairs"] / full["pairs"] * full["ms"]  # the masked FLOPs at the full causal kernel's rate
    print(f"{p}: window 4096 {win['ms']:.3f} ms vs full causal {full['ms']:.3f} ms: {full['ms'] / win['ms']:.2f}x faster "
          f"({full['pairs'] / win['pairs']:.2f}x fewer pairs)")
    print(f"{p}: 8 documents {docs['ms']:.3f} ms; at the full causal rate {at_rate:.3f} ms ({docs['ms'] / at_rate:.3f}x); "
          f"the documents alone summed {alone:.3f} ms ({docs['ms'] / alone:.3f}x)")
PY
  ;;
table)
  echo "== masked workloads fwd+bwd on $N GPUs: measured (median of $ITERS after 500 ms heat) vs predicted"
  echo "workload,scheme,layout,measured_ms,predicted_ms,fwd_steps,bwd_steps"
  for w in "B=1,H=32,D=128,S=131072,causal,window=4096" "B=1,H=32,D=128,S=131072,causal,docs=$DOCS8" \
           "B=1,H=32,D=128,S=131072,causal" "B=1,H=32,Hkv=8,D=128,S=65536,causal,docs=16384+16384+16384+16384"; do
    for s in ring zigzag hamilton allgather ulysses; do
      $T plan -t complete:$N -s $s -w "$w" -q -o "$OUT/plan.json" 2>/dev/null || continue
      read -r lay fs bs < <(python3 -c "
import json; p = json.load(open('$OUT/plan.json'))
print(p['layout'], len(p.get('steps', [])) or p.get('step_count', 0), len(p.get('backward', {}).get('steps', [])) or p.get('backward', {}).get('step_count', 0))")
      m=$($T run --backend cuda --plan "$OUT/plan.json" -w "$w" --pass fwd+bwd --iters "$ITERS" --warmup 2 --heat-ms 500 2>&1 |
          tee -a "$OUT/table.log" | grep -oE "median [0-9.]+ us" | grep -oE "[0-9.]+")
      pr=$($T simulate -t complete:$N --plan "$OUT/plan.json" -w "$w" --pass fwd+bwd --json "$OUT/sim.json" -q 2>/dev/null &&
           python3 -c "import json;print(json.load(open('$OUT/sim.json'))['schemes'][0]['total_us'])")
      echo "\"$w\",$s,$lay,$(python3 -c "print(round(${m:-0}/1e3,3))"),$(python3 -c "print(round(${pr:-0}/1e3,3))"),$fs,$bs"
    done
  done
  ;;
esac
