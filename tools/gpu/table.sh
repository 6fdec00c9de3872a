#!/usr/bin/env bash
# Issue 16's table on N GPUs (device tool; h200-hgx-4 / -8 picked from the GPU count): every scheme on the
# issue's configurations, measured through the cuda backend (median of ITERS after --heat-ms HEAT) and
# predicted with the shipped profile; then the PyTorch ring (cuDNN, FA2) on the same configurations.
# Usage: tools/gpu/table.sh PASS ITERS HEAT [checks]     PASS: fwd | fwd+bwd. Results in $OUT.
set -uo pipefail
source "$(dirname "$0")/env.sh"
PASS=${1:-fwd}; ITERS=${2:-5}; HEAT=${3:-500}
N=$(nvidia-smi -L | wc -l)
nvidia-smi -L | tee "$OUT/device.txt"
tools/gpu/build.sh tasp || exit 1
T=build-gpu/tools/tasp
case $N in 8) TOPO=h200-hgx-8 ;; 4) TOPO=h200-hgx-4 ;; *) TOPO=complete:$N ;; esac
CFGS=()
for c in "B=1,H=32,D=128,S=13440" "B=1,H=32,D=128,S=26880" "B=1,H=32,D=128,S=53760" "B=1,H=32,D=128,S=107520" \
         "B=4,H=8,D=128,S=13440" "B=1,H=8,D=64,S=107520"; do CFGS+=("$c" "$c,causal"); done

if [ "${4:-}" = checks ]; then
  echo "== checks: every scheme vs fp64 / the whole problem on one GPU ($PASS)"
  for shape in "B=1,S=$((N * 2 * 150)),H=4,Hkv=2,D=64" "B=1,S=$((N * 2 * 1000)),H=16,Hkv=2,D=128"; do
    for mask in "" ",causal"; do
      for s in ring zigzag allgather hamilton; do
        [ "$s" = zigzag ] && [ -z "$mask" ] && continue
        $T run --backend cuda -t $TOPO -s $s -w "$shape$mask" --pass $PASS --check --iters 2 --warmup 1 2>&1 |
          grep -E "PASS|FAIL|error" | sed "s/^/$s $shape$mask: /" | tee -a "$OUT/check.log"
      done
    done
  done
fi

echo "== table ($PASS, $TOPO): measured vs predicted (shipped profile), auto's choice"
echo "config,scheme,measured_ms,predicted_ms,ranks,pass,auto" > "$OUT/runs.csv"
for w in "${CFGS[@]}"; do
  auto=$($T plan -t $TOPO -s auto -w "$w" --pass $PASS -q -o /dev/null 2>&1 | grep -oE -- "-> [a-z-]+" | cut -c4-)
  for s in ring zigzag allgather hamilton; do
    case $w in *causal*) ;; *) [ "$s" = zigzag ] && continue ;; esac
    m=$($T run --backend cuda -t $TOPO -s $s -w "$w" --pass $PASS --iters "$ITERS" --warmup 2 --heat-ms "$HEAT" 2>&1 |
        tee -a "$OUT/runs.log" | grep -oE "median [0-9.]+ us" | grep -oE "[0-9.]+")
    p=$($T simulate -t $TOPO -s $s -w "$w" --pass $PASS --json "$OUT/sim.json" -q 2>/dev/null &&
        python3 -c "import json;print(json.load(open('$OUT/sim.json'))['schemes'][0]['total_us'])")
    echo "\"$w\",$s,$(python3 -c "print(${m:-0}/1e3)"),$(python3 -c "print(${p:-0}/1e3)"),$N,$PASS,$auto" | tee -a "$OUT/runs.csv"
  done
done
$T report --runs "$OUT/runs.csv" -t $TOPO -o "$OUT/report" 2>&1 | head -2 | tee "$OUT/report.txt"

echo "== PyTorch ring (cuDNN, FA2), same configurations"
args=()
for w in "${CFGS[@]}"; do args+=(-w "$w"); done
timeout 400 python3 tools/gpu/torch_ring.py "${args[@]}" --iters "$ITERS" --csv "$OUT/torch-ring.csv" 2>&1 | tee "$OUT/torch-ring.txt"
