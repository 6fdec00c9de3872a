#!/usr/bin/env bash
# The simulator against the executor on N GPUs (the device tool; nvidia-h200-x2 and up), for issue 17:
#  1. kernel rates of this build, cold (a short burst) and hot (each kernel after --heat-ms of the same work,
#     alone and with forward and backward taking turns);
#  2. a fit set: six runs with their timelines (the executor's pass starts and step gaps, NCCL's share);
#  3. calibrate: the shared NCCL table + 1 + 2 -> profile.yaml (the procedure behind the shipped profile);
#  4. a validation set of configurations used nowhere in 1-3 (other S, H, D, GQA, batch, causal mix): every
#     scheme measured fwd+bwd and fwd alone after heating (--heat-ms), with timelines, and predicted;
#  5. tasp report over the validation runs; one run again with --speedup and --json (memory, speedup).
# Everything goes to $OUT/r (tar.gz at the end). Usage: tools/gpu/validate-model.sh [ITERS] [HEAT_MS] [SET]
# SET 1, 2: the configurations of the first two validations (docs/measurements/h200x2-model/val1, val2), 3: those of
# the third, checked against the shipped profile only (steps 1-3 skipped: SHIPPED=1 does the same for any set).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/tasp-out}
R="$OUT/r"
mkdir -p "$R"
export NCCL_NVLS_ENABLE=0
ITERS=${1:-5}
HEAT=${2:-2000}  # the power limiter settles over about a second (kernels-bwd.md, session 19)
SET=${3:-3}
SHIPPED=${SHIPPED:-$([ "$SET" = 3 ] && echo 1 || echo 0)}
N=$(nvidia-smi -L | wc -l)
nvidia-smi -L | tee "$R/device.txt"
OUT="$R" tools/gpu/build.sh tasp || exit 1
T=build-gpu/tools/tasp
case $N in 8) TOPO=h200-hgx-8 ;; 4) TOPO=h200-hgx-4 ;; *) TOPO=complete:$N ;; esac
nvidia-smi --query-gpu=index,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv > "$R/clocks.csv"
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }

PROFILE="$R/profile.yaml"
if [ "$SHIPPED" = 1 ]; then
  PROFILE=topologies/h200-hgx-8.profile.yaml
  stamp "1-3 skipped: the shipped profile"
else
stamp "1. kernel rates, cold and hot"
tools/gpu/kernel-profile.sh "$R"
nvidia-smi --query-gpu=index,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv,noheader >> "$R/clocks.csv"
grep -v "^#" "$R/kernel.txt" | head -90

stamp "2. fit set (timelines for the executor's terms)"
tools/gpu/fit-set.sh "$R" "$ITERS" "$HEAT"

stamp "3. calibrate"
$T calibrate --fit docs/measurements/h200-nccl-steps.csv "$R/kernel.csv" --timeline "$R"/fit-*.json -t h200-hgx-8 \
  -o "$R/profile.yaml" > "$R/calibrate.txt" 2>&1
grep -E "attention|executor|samples" "$R/calibrate.txt" | tail -60
grep -E "sustained|executor|_us:|share|gbps" "$R/profile.yaml"
fi

stamp "4. validation set"
if [ "$SET" = 3 ]; then
  CFGS=("B=1,H=32,Hkv=8,D=128,S=20480,causal" "B=2,H=16,Hkv=4,D=128,S=16384" "B=1,H=12,Hkv=4,D=64,S=61440,causal"
        "B=4,H=16,Hkv=2,D=128,S=6144,causal" "B=1,H=40,Hkv=8,D=128,S=24576" "B=1,H=8,D=128,S=98304,causal")
elif [ "$SET" = 1 ]; then
  CFGS=("B=1,H=16,Hkv=4,D=128,S=24576,causal" "B=2,H=16,D=128,S=12288" "B=1,H=8,Hkv=2,D=64,S=49152,causal"
        "B=1,H=32,Hkv=8,D=128,S=40960" "B=4,H=8,D=64,S=8192,causal" "B=1,H=16,Hkv=2,D=128,S=65536,causal")
else
  CFGS=("B=1,H=32,Hkv=4,D=128,S=28672,causal" "B=2,H=8,Hkv=2,D=64,S=20480" "B=1,H=16,D=128,S=81920,causal"
        "B=8,H=8,D=128,S=4096,causal" "B=1,H=24,Hkv=8,D=128,S=36864" "B=1,H=4,Hkv=1,D=64,S=131072,causal")
fi
echo "config,scheme,measured_ms,predicted_ms,ranks,pass" > "$R/runs.csv"
mkdir -p "$R/tl"
for w in "${CFGS[@]}"; do
  for s in ring zigzag allgather hamilton; do
    case $w in *causal*) ;; *) [ "$s" = zigzag ] && continue ;; esac
    for pass in fwd+bwd fwd; do
      tag="$s-${pass/+/_}-${w//[,=]/_}"
      m=$(timeout 120 $T run --backend cuda -t $TOPO -s $s -w "$w" --pass $pass --iters "$ITERS" --warmup 2 --heat-ms "$HEAT" \
          --timeline "$R/tl/$tag.json" 2>&1 | tee -a "$R/runs.log" | grep -oE "median [0-9.]+ us" | grep -oE "[0-9.]+")
      p=$($T simulate -t $TOPO -s $s -w "$w" --pass $pass --profile "$PROFILE" --json "$R/sim.json" -q \
          --timeline "$R/tl/sim-$tag.json" 2>/dev/null &&
          python3 -c "import json;print(json.load(open('$R/sim.json'))['schemes'][0]['total_us'])")
      echo "\"$w\",$s,$(python3 -c "print(${m:-0}/1e3)"),$(python3 -c "print(${p:-0}/1e3)"),$N,$pass" | tee -a "$R/runs.csv"
    done
  done
  nvidia-smi --query-gpu=index,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv,noheader >> "$R/clocks.csv"
done

stamp "5. report; speedup and memory"
$T report --runs "$R/runs.csv" -t $TOPO --profile "$PROFILE" -o "$R/report" > "$R/report.txt" 2>&1
head -3 "$R/report.txt"
timeout 120 $T run --backend cuda -t $TOPO -s hamilton -w "${CFGS[0]}" --pass fwd+bwd --iters 3 \
  --warmup 1 --speedup --json "$R/run-speedup.json" 2>&1 | tail -6
stamp "done"
tar -czf "$OUT/results.tar.gz" -C "$R" . && rm -rf "$R"
