#!/usr/bin/env bash
# On a machine with N GPUs: build, check every scheme on the cuda backend, calibrate the kernel rates,
# then measure the issue's configurations and predict each with the simulator. Results go to $OUT:
# runs.csv (measured vs predicted), kernel.csv, profile.yaml, check.log, and a few timelines.
# Usage: tools/gpu/executor.sh [ITERS]
set -uo pipefail
source "$(dirname "$0")/env.sh"
ITERS=${1:-10}
N=$(nvidia-smi -L | wc -l)
nvidia-smi -L | tee "$OUT/device.txt"
tools/gpu/build.sh tasp || exit 1
T=build-gpu/tools/tasp
case $N in 8) TOPO=h200-hgx-8 ;; 4) TOPO=h200-hgx-4 ;; *) TOPO=complete:$N ;; esac

# 1. Correctness of every scheme against the whole problem on one GPU, full and causal.
# Small shapes check against fp64 on the CPU; larger ones against the whole problem on one GPU.
for shape in "B=1,S=$((N * 2 * 48)),H=4,Hkv=2,D=64" "B=2,S=$((N * 2 * 336)),H=8,Hkv=4,D=128"; do
  for mask in "" ",causal"; do
    for s in ring zigzag allgather hamilton; do
      [ "$s" = zigzag ] && [ -z "$mask" ] && continue
      $T run --backend cuda -t $TOPO -s $s -w "$shape$mask" --check --iters 1 --warmup 0 \
        2>&1 | grep -E "check|error" | sed "s/^/$s $shape$mask: /" | tee -a "$OUT/check.log"
    done
  done
done

# 2. Kernel rates of this build -> compute part of the profile (comm: the shared NCCL table).
tools/gpu/kernel-rates.sh "$OUT/kernel.csv" | tee "$OUT/kernel.txt"
$T calibrate --fit docs/measurements/h200-nccl-steps.csv "$OUT/kernel.csv" -t h200-hgx-8 -o "$OUT/profile.yaml" \
  > "$OUT/calibrate.txt" 2>&1
# NCCL steps on this machine's GPUs (kept for the record; n=8 figures come from the shared table).
$T calibrate --measure --iters 20 --csv "$OUT/nccl-steps-local.csv" -t $TOPO -o "$OUT/profile-local.yaml" \
  > "$OUT/calibrate-local.txt" 2>&1
tail -3 "$OUT/calibrate-local.txt"
tail -20 "$OUT/calibrate.txt"

# 3. The issue's configurations: measured (median of ITERS) and predicted.
echo "config,scheme,measured_ms,predicted_ms,ranks" > "$OUT/runs.csv"
for cfg in "B=1,H=32,D=128,S=13440" "B=1,H=32,D=128,S=26880" "B=1,H=32,D=128,S=53760" "B=1,H=32,D=128,S=107520" \
           "B=4,H=8,D=128,S=13440" "B=1,H=8,D=64,S=107520"; do
  for mask in "" ",causal"; do
    w="$cfg$mask"
    for s in ring zigzag allgather hamilton; do
      [ "$s" = zigzag ] && [ -z "$mask" ] && continue
      m=$($T run --backend cuda -t $TOPO -s $s -w "$w" --iters "$ITERS" --warmup 3 --timeline "$OUT/tl-$s$mask-${cfg//[,=]/_}.json" 2>&1 |
          tee -a "$OUT/runs.log" |
          grep -oE "median [0-9.]+ us" | grep -oE "[0-9.]+")
      p=$($T simulate -t $TOPO -s $s -w "$w" --profile "$OUT/profile.yaml" --json "$OUT/sim.json" -q \
          --timeline "$OUT/sim-$s$mask-${cfg//[,=]/_}.json" 2>/dev/null &&
          python3 -c "import json;print(json.load(open('$OUT/sim.json'))['schemes'][0]['total_us'])")
      echo "\"$w\",$s,$(python3 -c "print(${m:-0}/1e3)"),$(python3 -c "print(${p:-0}/1e3)"),$N" | tee -a "$OUT/runs.csv"
    done
  done
done

$T report --runs "$OUT/runs.csv" -t $TOPO --profile "$OUT/profile.yaml" -o "$OUT/report" > /dev/null
$T report --simulated "$OUT/sim-hamilton,causal-B_1_H_32_D_128_S_26880.json" \
  --measured "$OUT/tl-hamilton,causal-B_1_H_32_D_128_S_26880.json" -o "$OUT/report-gantt" > /dev/null
