#!/usr/bin/env bash
# A box of 4 or 8 GPUs against the published TASP code and the PyTorch baselines, on that code's configurations
# (set:anchor, ../shared/measurements/h200x8-tasp-anchor.txt; docs/measurements/executor.md): the topology follows
# the GPU count (h200-hgx-4, h200-hgx-8). Such boxes are lent rarely and a device call lasts 10 minutes at most, so
# the work is in steps, each into $OUT/STEP/ (STEP.log beside it), and a summary in $OUT/summary.txt:
#   check      every scheme fwd+bwd --check on small shapes, head groups, --collectives, masks, mpirun (check.sh multi);
#   fwd        every scheme's forward on set:anchor, each checked against the whole problem on one GPU (--check),
#              measured (median of 5 after 2 s of heat) and predicted with the shipped profile;
#   fwd+bwd    every scheme's fwd+bwd on set:anchor (median of 3), each configuration followed by the PyTorch
#              baselines (ring/zigzag, Ulysses, all-gather on cuDNN; their forward and fwd+bwd);
#   speedup    auto's scheme fwd+bwd with --speedup (the whole problem on one GPU too) where S >= 26880;
#   calibrate  NCCL's steps on this box (tasp calibrate --measure) and the profile fitted from them.
# Usage: tools/gpu/box.sh [STEP...]   (default: all five; about 25 minutes on 4x H200: take three calls, e.g.
#   `check fwd`, `fwd+bwd`, `speedup calibrate`). BOX_SECONDS (570): the steps end by then (a device call's limit);
#   CONFIGS (set:anchor): the workloads of fwd and fwd+bwd, to take the rest of a set in a later call.
# $OUT ends with summary.txt and results.tar.gz (everything else).
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
R=$OUT

speedup() {  # auto's scheme fwd+bwd with --speedup where S >= 26880 -> $OUT/speedup.csv
  local w auto
  echo "config,scheme,pass,measured_ms,single_gpu_ms,speedup,efficiency" > "$OUT/speedup.csv"
  for w in $(workload_set anchor); do
    [ "$(echo "$w" | grep -oE 'S=[0-9]+' | cut -c3-)" -ge 26880 ] || continue
    auto=$(auto_scheme "$w" fwd+bwd)
    timeout 200 $T run --backend cuda -t $TOPO -s "${auto:-allgather}" -w "$w" --pass fwd+bwd --iters 3 --warmup 1 --heat-ms 2000 \
      --speedup --json "$OUT/j.json" > "$OUT/run.txt" 2>&1 && python3 - "$w" "$OUT/j.json" >> "$OUT/speedup.csv" <<'PY'
import json, sys
j = json.load(open(sys.argv[2]))
print(f'"{sys.argv[1]}",{j["scheme"]},fwd+bwd,{j["total_us"] / 1e3:.3f},{j["single_device_us"] / 1e3:.3f},{j["speedup"]:.3f},{j["parallel_efficiency"]:.3f}')
PY
    tail -1 "$OUT/speedup.csv"
  done
}
calibrate() {  # NCCL's steps on this box -> $OUT/comm.csv and the profile fitted from them
  $T calibrate --measure -t $TOPO --base "$PROFILE" --csv "$OUT/comm.csv" -o "$OUT/comm.profile.yaml" 2>&1 | tail -30
}
case ${1:-} in _speedup) speedup; exit ;; _calibrate) calibrate; exit ;; esac

steps=${*:-check fwd fwd+bwd speedup calibrate}
deadline=$(( $(date +%s) + ${BOX_SECONDS:-570} ))  # a step still running then is ended, and what it wrote is kept
device_info
build tasp
step() {  # NAME COMMAND...
  local name=$1 dir=${1/+/_} t0=$(date +%s) rc
  [[ " $steps " == *" $name "* ]] || return 0
  shift
  mkdir -p "$R/$dir"
  OUT="$R/$dir" timeout $(( deadline - t0 > 1 ? deadline - t0 : 1 )) "$@" > "$R/$dir.log" 2>&1
  rc=$?
  { echo "== $name (rc $rc, $(( $(date +%s) - t0 )) s): $*"; tail -${TAIL:-16} "$R/$dir.log"; } | tee -a "$R/summary.txt"
}
step check tools/gpu/check.sh multi
step fwd env BASELINES=none TASP_RUN_ARGS=--check tools/gpu/compare.sh fwd 5 ${CONFIGS:-set:anchor}
step fwd+bwd tools/gpu/compare.sh fwd+bwd 3 ${CONFIGS:-set:anchor}
step speedup "$0" _speedup
step calibrate "$0" _calibrate
# Everything in one archive (the device tool returns at most 8 files), the summary beside it.
tar -czf /tmp/tasp-box.tar.gz -C "$R" --exclude=summary.txt . && find "$R" -mindepth 1 ! -name summary.txt -delete &&
  mv /tmp/tasp-box.tar.gz "$R/results.tar.gz"
