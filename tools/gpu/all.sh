#!/usr/bin/env bash
# Every GPU entry point once, in one device call: check.sh, kernels.sh, compare.sh, model.sh validate, python.sh and
# configs.sh (2+ GPUs),
# then ab.sh, clocks.sh, trace.sh fwd and ncu.sh on one short shape. Each one's output goes to $OUT/NAME.log and
# its files to $OUT/NAME/, all packed into $OUT/results.tar.gz (the device tool returns at most 8 files);
# a summary (each step's exit status, time and last lines) to stdout and $OUT/summary.txt.
# Usage: tools/gpu/all.sh [quick] [STEP...]   quick: each in its shortest form; STEPs (check kernels compare model
#   python configs ab clocks trace ncu): only those (a device call is limited to 10 minutes; all of quick takes about 12 on 2x H100).
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
q=; [ "${1:-}" = quick ] && q=quick && shift
only=" $* "
R=$OUT
step() {  # NAME COMMAND...
  local name=$1 t0=$(date +%s) rc
  [ "$only" = "  " ] || [[ "$only" == *" $name "* ]] || return 0
  shift
  mkdir -p "$R/$name"
  OUT="$R/$name" "$@" > "$R/$name.log" 2>&1
  rc=$?
  { echo "== $name (rc $rc, $(( $(date +%s) - t0 )) s): $*"; tail -${TAIL:-12} "$R/$name.log"; } | tee -a "$R/summary.txt"
}
shape=B=1,S=8192,H=16,D=128,causal
step check tools/gpu/check.sh $q
step kernels tools/gpu/kernels.sh ${q:-all}
if [ "$N" -ge 2 ]; then
  if [ -n "$q" ]; then step compare tools/gpu/compare.sh fwd+bwd 3 set:quick; else step compare tools/gpu/compare.sh; fi
  step model tools/gpu/model.sh validate ${q:-3}
  if [ -n "$q" ]; then step python tools/gpu/python.sh check train; else step python tools/gpu/python.sh; fi
  if [ -n "$q" ]; then step configs env CONFIGS="tiny qwen3_4b medium_large_head" tools/gpu/configs.sh; else step configs tools/gpu/configs.sh; fi
fi
step ab tools/gpu/ab.sh fwd 1 "TASP_FWD_RESCALE_SLACK=0" --shape $shape
step clocks tools/gpu/clocks.sh fwd build-gpu/tools/tasp bench kernel --heat-ms 2000 --shape $shape
[ -n "$q" ] && export TASP_TRACE_QUICK=1
step trace tools/gpu/trace.sh fwd
step ncu tools/gpu/ncu.sh attention_fwd --pass fwd --shape $shape
tar -czf /tmp/tasp-results.tar.gz -C "$R" . && mv /tmp/tasp-results.tar.gz "$R/results.tar.gz"
