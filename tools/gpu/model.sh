#!/usr/bin/env bash
# Does the simulator predict this machine? The steps behind a profile and its check (docs/simulator.md):
#   sweep      this build's kernel rates, cold and hot (lib/kernel-profile.sh) -> $OUT/kernel.csv (one GPU);
#   comm       NCCL's step rates on this machine's GPUs (tasp calibrate --measure) -> $OUT/comm.csv, $OUT/comm.profile.yaml;
#   fit-set    eight runs with timelines (two of them under 2 ms) for the executor's terms (lib/fit-set.sh) -> $OUT/fit-*.json;
#   validate   a validation set (1, 2 or 3, or quick) measured through every scheme, fwd+bwd and fwd, predicted with
#              PROFILE (default: the shipped profile of the GPU kind), and `tasp report` over it;
#   all        sweep, fit-set and comm, a profile calibrated from them, and validation set 3 with that profile.
# Usage: tools/gpu/model.sh sweep|comm|fit-set|validate [SET]|all [ITERS]   FABRIC, HEAT_MS (2000), PROFILE in the environment.
# Results in $OUT (runs.csv, report/, profile.yaml, the CSVs above); refit the shipped profiles from them with
# tools/refit-profiles.sh after committing them under docs/measurements/data/.
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
WHAT=${1:-validate}; SET=${2:-3}; ITERS=${3:-5}
[ "$WHAT" = all ] && ITERS=${2:-5}
HEAT=${HEAT_MS:-2000}
device_info
build tasp
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
nccl_table=docs/measurements/data/nccl/h200x8-steps-2026-11-22.csv

sweep() { stamp "kernel rates, cold and hot"; CUDA_VISIBLE_DEVICES=0 tools/gpu/lib/kernel-profile.sh "$OUT"; grep -v "^#" "$OUT/kernel.txt" | head -40; }
comm() {
  stamp "NCCL steps on $N GPUs (${FABRIC:-nvlink})"
  timeout 500 $T calibrate --measure -t $TOPO --base "$PROFILE" --csv "$OUT/comm.csv" -o "$OUT/comm.profile.yaml" 2>&1 | tail -30
}
fitset() { stamp "fit set on $TOPO (${FABRIC:-nvlink})"; TOPO=$TOPO tools/gpu/lib/fit-set.sh "$OUT" "$ITERS" "$HEAT"; }
validate() {
  local set=$1 cfgs
  case $set in
    1) cfgs="B=1,H=16,Hkv=4,D=128,S=24576,causal B=2,H=16,D=128,S=12288 B=1,H=8,Hkv=2,D=64,S=49152,causal B=1,H=32,Hkv=8,D=128,S=40960 B=4,H=8,D=64,S=8192,causal B=1,H=16,Hkv=2,D=128,S=65536,causal" ;;
    2) cfgs="B=1,H=32,Hkv=4,D=128,S=28672,causal B=2,H=8,Hkv=2,D=64,S=20480 B=1,H=16,D=128,S=81920,causal B=8,H=8,D=128,S=4096,causal B=1,H=24,Hkv=8,D=128,S=36864 B=1,H=4,Hkv=1,D=64,S=131072,causal" ;;
    3) cfgs="B=1,H=32,Hkv=8,D=128,S=20480,causal B=2,H=16,Hkv=4,D=128,S=16384 B=1,H=12,Hkv=4,D=64,S=61440,causal B=4,H=16,Hkv=2,D=128,S=6144,causal B=1,H=40,Hkv=8,D=128,S=24576 B=1,H=8,D=128,S=98304,causal" ;;
    quick) cfgs="B=1,H=32,Hkv=8,D=128,S=20480,causal B=2,H=16,Hkv=4,D=128,S=16384" ;;
    *) echo "validation set '$set': 1, 2, 3 or quick"; exit 2 ;;
  esac
  stamp "validation set $set, profile $PROFILE"
  echo "config,scheme,measured_ms,predicted_ms,ranks,pass,fabric,pieces" > "$OUT/runs.csv"
  mkdir -p "$OUT/tl"
  for w in $cfgs; do
    for s in ring zigzag allgather hamilton; do
      case $w in *causal*) ;; *) [ $s = zigzag ] && continue ;; esac
      for pass in fwd+bwd fwd; do
        tag="$s-${pass/+/_}-${w//[,=]/_}"
        out=$(timeout 200 $T run --backend cuda -t $TOPO -s $s -w "$w" --pass $pass --iters "$ITERS" --warmup 2 --heat-ms "$HEAT" \
            --timeline "$OUT/tl/$tag.json" 2>&1 | tee -a "$OUT/runs.log")
        m=$(echo "$out" | ms_of) pc=$(echo "$out" | pieces_of)
        p=$(predict_ms -t $TOPO -s $s $(pieces_flags $pc) -w "$w" --pass $pass --profile "$PROFILE")
        [ "$m" != 0 ] && echo "\"$w\",$s,$m,$p,$N,$pass,${FABRIC:-nvlink},$pc" | tee -a "$OUT/runs.csv"
      done
    done
  done
  $T report --runs "$OUT/runs.csv" -t $TOPO --profile "$PROFILE" $(transport_flags) -o "$OUT/report" > "$OUT/report.txt" 2>&1
  head -4 "$OUT/report.txt"
}
case $WHAT in
  sweep) sweep ;;
  comm) comm ;;
  fit-set) fitset ;;
  validate) validate "$SET" ;;
  all)
    sweep; fitset; comm
    stamp "calibrate: the NCCL table (or this machine's steps) + the sweep + the fit set -> profile.yaml"
    comm_csv=$nccl_table; [ -s "$OUT/comm.csv" ] && [ "${FABRIC:-nvlink}" != nvlink ] && comm_csv=$OUT/comm.csv
    $T calibrate --fit "$comm_csv" "$OUT/kernel.csv" --timeline "$OUT"/fit-*.json -t $TOPO --base "$PROFILE" \
      -o "$OUT/profile.yaml" > "$OUT/calibrate.txt" 2>&1
    PROFILE=$OUT/profile.yaml validate 3 ;;
  *) sed -n '2,12p' "$0"; exit 2 ;;
esac
stamp done
