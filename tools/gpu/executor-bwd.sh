#!/usr/bin/env bash
# On N GPUs (the device tool; nvidia-h200-x2 and up): forward+backward through the cuda backend.
#  1. every scheme's fwd+bwd checked against fp64 (small) or the whole problem on one GPU, GQA, lengths that
#     are not powers of two; two schemes again as one process per GPU under mpirun;
#  2. kernel rates forward and backward -> the compute part of a profile (comm from the shared NCCL table);
#  3. the issue's configurations: every scheme's fwd+bwd measured (median of ITERS) and predicted, each
#     configuration followed at once by the PyTorch ring baseline (tools/gpu/torch_ring.py, cuDNN and FA2 kernels), so
#     that both are timed at the same GPU warmth; tasp's best scheme against the baseline's best, per configuration;
#  4. the baseline's gradients checked against one-GPU autograd;
#  5. tasp report over the runs. Everything goes to $OUT (packed into results.tar.gz).
# Usage: tools/gpu/executor-bwd.sh [ITERS] [HEAT_MS]
#   HEAT_MS (2000): tasp and the baseline alike run untimed this long before each configuration is timed (the power
#   limiter settles over about a second: docs/measurements/kernels-bwd.md, session 19).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/tasp-out}
R="$OUT/r"
mkdir -p "$R"
export NCCL_NVLS_ENABLE=0
ITERS=${1:-5}
HEAT=${2:-2000}
N=$(nvidia-smi -L | wc -l)
nvidia-smi -L | tee "$R/device.txt"
OUT="$R" tools/gpu/build.sh tasp || exit 1
T=build-gpu/tools/tasp
case $N in 8) TOPO=h200-hgx-8 ;; 4) TOPO=h200-hgx-4 ;; *) TOPO=complete:$N ;; esac

echo "== 1. checks (fwd+bwd vs fp64 / one GPU)"
for shape in "B=1,S=$((N * 2 * 150)),H=4,Hkv=2,D=64" "B=2,S=$((N * 2 * 336)),H=8,Hkv=4,D=128" "B=1,S=$((N * 2 * 1000)),H=16,Hkv=2,D=128"; do
  for mask in "" ",causal"; do
    for s in ring zigzag allgather hamilton; do
      [ "$s" = zigzag ] && [ -z "$mask" ] && continue
      $T run --backend cuda -t $TOPO -s $s -w "$shape$mask" --pass fwd+bwd --check --iters 2 --warmup 1 2>&1 |
        grep -E "PASS|FAIL|error" | sed "s/^/$s $shape$mask: /" | tee -a "$R/check.log"
    done
  done
done
W="B=1,S=$((N * 2 * 1680)),H=32,Hkv=8,D=128,causal"
for s in zigzag hamilton; do
  mpirun --allow-run-as-root --oversubscribe -np $N -x NCCL_NVLS_ENABLE $T run --backend cuda -t $TOPO -s $s -w $W \
    --pass fwd+bwd --check --iters 3 --warmup 1 2>&1 | grep -E "runs|PASS|FAIL|error" | sed "s/^/mpirun $s $W: /" |
    tee -a "$R/check.log"
done

echo "== 2. kernel rates (fwd, bwd) -> profile"
tools/gpu/kernel-rates.sh "$R/kernel.csv" fwd+bwd > "$R/kernel.txt" 2>&1
grep -v "^#" "$R/kernel.txt" | head -40
$T calibrate --fit docs/measurements/h200-nccl-steps.csv "$R/kernel.csv" -t h200-hgx-8 -o "$R/profile.yaml" > "$R/calibrate.txt" 2>&1
grep -E "attention" "$R/calibrate.txt" | head -40

echo "== 3. the issue's configurations, fwd+bwd: measured and predicted"
CFGS=("B=1,H=32,D=128,S=16384" "B=1,H=32,D=128,S=16384,causal" "B=1,H=32,D=128,S=65536" "B=1,H=32,D=128,S=65536,causal"
      "B=1,H=8,D=64,S=131072,causal")
echo "config,scheme,measured_ms,predicted_ms,ranks,pass,fwd_ms_measured" > "$R/runs.csv"
echo "config,kernel,algo,fwd_ms,fwd_bwd_ms,ranks" > "$R/torch-ring.csv"
for w in "${CFGS[@]}"; do
  for s in ring zigzag allgather hamilton; do
    case $w in *causal*) ;; *) [ "$s" = zigzag ] && continue ;; esac
    tag="$s-${w//[,=]/_}"
    m=$($T run --backend cuda -t $TOPO -s $s -w "$w" --pass fwd+bwd --iters "$ITERS" --warmup 2 --heat-ms "$HEAT" --timeline "$R/tl-$tag.json" 2>&1 |
        tee -a "$R/runs.log" | grep -oE "median [0-9.]+ us" | grep -oE "[0-9.]+")
    f=$($T run --backend cuda -t $TOPO -s $s -w "$w" --pass fwd --iters "$ITERS" --warmup 2 --heat-ms "$HEAT" 2>&1 |
        tee -a "$R/runs.log" | grep -oE "median [0-9.]+ us" | grep -oE "[0-9.]+")
    p=$($T simulate -t $TOPO -s $s -w "$w" --pass fwd+bwd --profile "$R/profile.yaml" --json "$R/sim.json" -q \
        --timeline "$R/sim-$tag.json" 2>/dev/null &&
        python3 -c "import json;print(json.load(open('$R/sim.json'))['schemes'][0]['total_us'])")
    echo "\"$w\",$s,$(python3 -c "print(${m:-0}/1e3)"),$(python3 -c "print(${p:-0}/1e3)"),$N,fwd+bwd,$(python3 -c "print(${f:-0}/1e3)")" |
      tee -a "$R/runs.csv"
  done
  timeout 300 python3 tools/gpu/torch_ring.py -w "$w" --iters "$ITERS" --heat-ms "$HEAT" --csv "$R/tr.csv" 2>&1 | tee -a "$R/torch-ring.txt"
  tail -n +2 "$R/tr.csv" >> "$R/torch-ring.csv"
done
python3 - "$R/runs.csv" "$R/torch-ring.csv" <<'EOF' | tee "$R/best-vs-ring.txt"
import csv, sys
best = {}
for r in csv.DictReader(open(sys.argv[1])):
    if float(r["measured_ms"]) > 0 and (r["config"] not in best or float(r["measured_ms"]) < best[r["config"]][1]):
        best[r["config"]] = (r["scheme"], float(r["measured_ms"]))
ring = {}
for r in csv.DictReader(open(sys.argv[2])):
    k = (r["config"], r["kernel"])
    if k not in ring or float(r["fwd_bwd_ms"]) < ring[k][1]:
        ring[k] = (r["algo"], float(r["fwd_bwd_ms"]))
print("# fwd+bwd ms: tasp's best scheme, the PyTorch ring's best (cuDNN, FA2), speedup of tasp")
for c, (s, ms) in best.items():
    cu, fa = ring.get((c, "cudnn"), ("-", 0)), ring.get((c, "fa2"), ("-", 0))
    print(f"{c:34} tasp {s:9} {ms:8.2f}  cudnn {cu[1]:8.2f} ({cu[1] / ms:.2f}x)  fa2 {fa[1]:8.2f} ({fa[1] / ms:.2f}x)")
EOF

echo "== 4. PyTorch ring baseline: gradients against one-GPU autograd"
timeout 200 python3 tools/gpu/torch_ring.py -w "B=1,S=$((N * 2 * 1024)),H=8,D=128,causal" -w "B=1,S=$((N * 2 * 1024)),H=8,D=128" \
  --iters 2 --check 2>&1 | tee "$R/torch-ring-check.txt"

echo "== 5. report"
$T report --runs "$R/runs.csv" -t $TOPO --profile "$R/profile.yaml" -o "$R/report" > "$R/report.txt" 2>&1
head -3 "$R/report.txt"
tar -czf "$OUT/results.tar.gz" -C "$R" . && rm -rf "$R"
