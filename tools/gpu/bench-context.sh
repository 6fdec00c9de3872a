#!/usr/bin/env bash
# On one GPU: one shape's backward timed in the settings our tables use, to tell why a shape reads differently
# in the side-by-side run (sdpa_bench.py --tasp: `--pass fwd+bwd`, one shape per process) than in the A/B runs
# (ab.sh: `--pass bwd`, all shapes in one process), and how long a kernel must be heated before its time no
# longer depends on what ran before it. For each heat in $HEATS, twice: tasp's backward alone, after its
# forward (fwd+bwd), taking turns with its forward (--mix), and PyTorch SDPA's cuDNN forward then backward,
# with the SM clock, instant power and the power-cap flag sampled every 100 ms (clocks.csv; each run's start
# and end in runs.txt).
# Usage: tools/gpu/bench-context.sh [SHAPE...] (default B=1,S=16384,H=32,D=128,causal)
#   HEATS="300 2000" (ms), BINS="build-gpu/tools/tasp build-base/tools/tasp" (each runs every tasp setting).
set -uo pipefail
source "$(dirname "$0")/env.sh"
shapes=("$@")
[ ${#shapes[@]} -eq 0 ] && shapes=(B=1,S=16384,H=32,D=128,causal)
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw.instant,clocks_event_reasons.sw_power_cap,temperature.gpu \
  --format=csv,noheader -lms 100 > "$OUT/clocks.csv" &
smi=$!
stamp() { echo "$(date +%H:%M:%S.%N | cut -c1-12) $*" >> "$OUT/runs.txt"; }
bwd_of() {  # the backward's TFLOP/s in a bench JSON (tasp's rows, or sdpa_bench's)
  python3 -c "
import json, sys
rows = json.load(open(sys.argv[1]))
r = [x.get('bwd_tflops', x.get('tflops')) for x in rows if x.get('pass', 'bwd') == 'bwd' and x.get('backend', 'cudnn') == 'cudnn']
print('%.1f' % r[-1] if r else 'n/a')" "$1" 2>/dev/null || echo n/a
}
for shape in "${shapes[@]}"; do
  for heat in ${HEATS:-300 2000}; do
    for r in 1 2; do
      line="$shape heat $heat round $r:"
      for T in ${BINS:-build-gpu/tools/tasp}; do
        tag=$(echo "$T" | cut -d/ -f1)
        for setting in "bwd" "fwd+bwd" "bwd --mix"; do
          stamp "start $tag $shape heat $heat $setting"
          timeout 120 $T bench kernel --pass $setting --heat-ms "$heat" --shape "$shape" --json "$OUT/t.json" > /dev/null 2>&1
          stamp end
          line+="  $tag[$setting] $(bwd_of "$OUT/t.json")"
        done
      done
      stamp "start cudnn $shape heat $heat"
      timeout 120 python3 tools/gpu/sdpa_bench.py --backends cudnn --heat-ms "$heat" --shape "$shape" --json "$OUT/s.json" > /dev/null 2>&1
      stamp end
      echo "$line  cudnn $(bwd_of "$OUT/s.json")" | tee -a "$OUT/context.txt"
    done
  done
done
kill $smi
