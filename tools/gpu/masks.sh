#!/usr/bin/env bash
# Packed documents and sliding windows on the GPU (issue 14; device tool): the kernels' mask tests, masked
# workloads through every scheme on the cuda backend checked on 2 GPUs, kernel timings on one GPU (a 4096
# window and 8 packed documents against full causal, S=131072, H=32, D=128), and masked workloads measured
# beside the simulator's prediction on 2 GPUs.
# layouts: the zigzag-docs layout checked on the cuda backend, then packed documents measured and predicted with
# the zigzag, zigzag-docs and contiguous layouts.
# Usage: tools/gpu/masks.sh checks|kernel|table|layouts [ITERS]      Logs to $OUT; results also to stdout.
set -uo pipefail
source "$(dirname "$0")/env.sh"
WHAT=$1; ITERS=${2:-5}
N=$(nvidia-smi -L | wc -l)
nvidia-smi -L > "$OUT/device.txt"
tools/gpu/build.sh tasp tasp_kernel_tests || exit 1
T=build-gpu/tools/tasp
# 8 documents of mixed lengths packed into 131072 tokens
DOCS8=40000+8192+777+30000+16384+20000+5000+10719

# "measured_ms,predicted_ms" of $OUT/plan.json on workload $1, fwd+bwd (the run's output appended to $OUT/$2).
measured_predicted() {
  local m pr
  m=$($T run --backend cuda --plan "$OUT/plan.json" -w "$1" --pass fwd+bwd --iters "$ITERS" --warmup 2 --heat-ms 500 2>&1 |
      tee -a "$OUT/$2" | grep -oE "median [0-9.]+ us" | grep -oE "[0-9.]+")
  pr=$($T simulate -t complete:$N --plan "$OUT/plan.json" -w "$1" --pass fwd+bwd --json "$OUT/sim.json" -q 2>/dev/null &&
       python3 -c "import json;print(json.load(open('$OUT/sim.json'))['schemes'][0]['total_us'])")
  echo "$(python3 -c "print(round(${m:-0}/1e3,3))"),$(python3 -c "print(round(${pr:-0}/1e3,3))")"
}

case $WHAT in
checks)
  echo "== kernel tests: documents and windows (Hopper path, then the mma.sync path), and the causal ones"
  timeout 120 build-gpu/tests/tasp_kernel_tests --gtest_filter='*DocumentsAndWindows*:*Causal*:*Ragged*' 2>&1 | grep -E "^\[  |FAILED|Failure" | grep -vE "RUN|^\[----" | head -20
  TASP_ATTN_PATH=mma timeout 60 build-gpu/tests/tasp_kernel_tests --gtest_filter='AttentionGpu.DocumentsAndWindows' 2>&1 | grep -E "OK|FAILED" | head -3
  echo "== masked workloads fwd+bwd on the cuda backend, $N GPUs, vs the whole problem on one GPU (the last vs fp64 on the CPU)"
  for w in "B=1,S=8191,H=8,Hkv=2,D=64,causal,window=300" "B=2,S=8192,H=8,D=128,causal,docs=3000+1+4000+1191" \
           "B=1,S=8192,H=8,Hkv=1,D=64,window=500:40" "B=1,S=8192,H=8,Hkv=2,D=128,docs=5000+3192,window=256:0" \
           "B=1,S=1200,H=2,D=64,causal,docs=500+1+699,window=100"; do
    for s in ring zigzag allgather hamilton ulysses; do
      case $w in *causal*) ;; *) [ $s = zigzag ] && continue ;; esac
      timeout 90 $T run --backend cuda -t complete:$N -s $s -w "$w" --pass fwd+bwd --check --iters 2 --warmup 1 2>&1 |
        grep -E "PASS|FAIL|rror" | sed "s/^/$s $w: /" | tee -a "$OUT/check.log"
    done
  done
  ;;
kernel)
  echo "== kernels on one GPU: full causal, window 4096, $DOCS8 packed, each document alone (median of $ITERS, heated 2 s)"
  shapes=(--shape B=1,S=131072,H=32,D=128,causal --shape B=1,S=131072,H=32,D=128,causal,window=4096
          --shape B=1,S=131072,H=32,D=128,causal,docs=$DOCS8)
  for d in ${DOCS8//+/ }; do shapes+=(--shape B=1,S=$d,H=32,D=128,causal); done
  CUDA_VISIBLE_DEVICES=0 $T bench kernel "${shapes[@]}" --pass fwd+bwd --iters "$ITERS" --warmup 2 --heat-ms 2000 \
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
      echo "\"$w\",$s,$lay,$(measured_predicted "$w" table.log),$fs,$bs"
    done
  done
  ;;
layouts)
  echo "== zigzag-docs checked on the cuda backend ($N GPUs, fwd+bwd, vs the whole problem on one GPU)"
  for w in "B=2,S=8192,H=8,D=128,causal,docs=3000+1+4000+1191" "B=1,S=6000,H=4,Hkv=2,D=64,causal,docs=2500+17+3483"; do
    for s in zigzag hamilton; do
      $T plan -t complete:$N -s $s -w "$w" --layout zigzag-docs -q -o "$OUT/plan.json" || continue
      timeout 90 $T run --backend cuda --plan "$OUT/plan.json" -w "$w" --pass fwd+bwd --check --iters 2 --warmup 1 2>&1 |
        grep -E "PASS|FAIL|rror" | sed "s/^/$s zigzag-docs $w: /"
    done
  done
  echo "== packed documents fwd+bwd on $N GPUs by layout: measured (median of $ITERS after 500 ms heat) vs predicted"
  echo "workload,scheme,layout,measured_ms,predicted_ms"
  for w in "B=1,H=32,D=128,S=131072,causal,docs=$DOCS8" "B=1,H=32,Hkv=8,D=128,S=65536,causal,docs=16384+16384+16384+16384"; do
    for sl in zigzag:zigzag zigzag:zigzag-docs hamilton:zigzag hamilton:zigzag-docs hamilton:contiguous; do
      s=${sl%%:*} lay=${sl#*:}
      $T plan -t complete:$N -s $s -w "$w" --layout $lay -q -o "$OUT/plan.json" 2>/dev/null || continue
      echo "\"$w\",$s,$lay,$(measured_predicted "$w" layouts.log)"
    done
  done
  ;;
esac
