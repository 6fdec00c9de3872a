#!/usr/bin/env bash
# The fit set of the simulator's executor terms (the pass starts, step gaps, NCCL's share of the SMs, the dQ
# finish): eight runs through the cuda backend with their timelines, on N GPUs (the device tool; nvidia-h200-x2
# and up). tools/refit-profiles.sh fits the shipped profiles to the set committed
# (docs/measurements/data/model/); tools/gpu/model.sh fit-set runs it.
# On a forced fabric (tools/gpu/model.sh fit-set under FABRIC=shm|socket) TOPO names its machine file, so that the runs
# move their collectives as that fabric's profile says; allgather runs in one piece there too, the plan `tasp calibrate`
# rebuilds from a timeline to compare its steps with (the timelines do not record pieces).
# Usage: tools/gpu/lib/fit-set.sh DIR [ITERS] [HEAT_MS]   (needs build-gpu/tools/tasp; writes DIR/fit-*.json)
set -uo pipefail
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
DIR=$1
ITERS=${2:-5}
HEAT=${3:-1000}
mkdir -p "$DIR"
T=build-gpu/tools/tasp
N=$(nvidia-smi -L | wc -l)
case $N in 8) TOPO=${TOPO:-h200-hgx-8} ;; 4) TOPO=${TOPO:-h200-hgx-4} ;; *) TOPO=${TOPO:-complete:$N} ;; esac
FIT=("hamilton B=1,H=32,D=128,S=16384,causal fwd+bwd" "ring B=1,H=8,D=64,S=32768 fwd+bwd"
     "allgather B=1,H=16,Hkv=4,D=128,S=32768 fwd" "zigzag B=2,H=8,D=64,S=16384,causal fwd+bwd"
     "hamilton B=1,H=32,Hkv=4,D=128,S=49152 fwd+bwd" "ring B=1,H=16,D=128,S=8192 fwd"
     # The short end (`tiny`, `small`): a fit of runs from 0.6 ms up put the fixed terms 42-64% over a 0.2 ms pass.
     "allgather B=2,H=8,D=64,S=1024,causal fwd+bwd" "allgather B=4,H=12,D=128,S=4096,causal fwd+bwd")
for fw in "${FIT[@]}"; do
  set -- $fw
  one=(); [ "$1" = allgather ] && one=(--gather-pieces 1)
  timeout 120 $T run --backend cuda -t $TOPO -s $1 "${one[@]}" -w "$2" --pass $3 --iters "$ITERS" --warmup 2 --heat-ms "$HEAT" \
    --timeline "$DIR/fit-$1-${3/+/_}-${2//[,=]/_}.json" 2>&1 | grep -E "median|error" | sed "s/^/fit $1 $2 $3: /"
done
