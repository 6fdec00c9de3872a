#!/usr/bin/env bash
# Is tasp faster than what I would use today on this machine? Every tasp scheme through the cuda backend, measured
# (median of ITERS after heating HEAT_MS) and predicted by the simulator, and `--scheme auto`'s choice; right after
# each configuration the PyTorch baselines on the same GPUs (lib/torch_ring.py: ring-flash-attention's ring or
# zigzag ring, DeepSpeed-Ulysses and llama3-style all-gather on PyTorch's cuDNN kernels), so that both are timed at
# the same GPU warmth; then tasp's best against the baselines' best per configuration, and `tasp report` over the runs.
# Usage: tools/gpu/compare.sh [fwd|fwd+bwd] [ITERS] [WORKLOAD | set:NAME ...]
#   default: fwd+bwd, 5, set:long on 2 GPUs and set:anchor on 4 or 8 (sets: long, exposed, anchor, masks, quick;
#   tools/gpu/lib/common.sh lists them).
#   FABRIC=nvlink|shm|socket: NCCL forced off NVLink (a slow fabric on any 2+ GPU host), for tasp and PyTorch alike.
#   HEAT_MS (2000), KERNELS (cudnn; "cudnn,fa2" adds FlashAttention-2 baselines), BASELINES (ring,ulysses,allgather),
#   PROFILE (the shipped profile of the GPU kind; on FABRIC=shm|socket its comm measured on this host first unless
#   CALIBRATE=0), SCHEMES (every scheme that applies), TASP_RUN_ARGS (more `tasp run`
#   options, e.g. --collectives or --check), BASELINES=none (tasp alone),
#   TASP_RUN_ARGS=--measure-fabric: each tasp run measures the fabric's steps itself first and predicts itself with the
#   profile refitted to them (runs.csv's predicted_ms; report.txt's last line their errors); the default over sockets
#   (MEASURE_IN_RUN=0: not), whose steps a call's first minute measured 10-26% off its runs (2x H200, 2026-11-27),
#   where the runs' own steps predicted 8 runs within 6.1%,
#   FABRIC_AFTER (1: a fabric measured first is measured again after the runs, report.txt's last line the runs against
#   that profile), ROUNDS (1: each configuration in ROUNDS rounds, tasp and PyTorch in turn first; best.md then gives each round's
#   ratio and their median, for a fabric whose rate drifts between minutes: loopback sockets moved 10-20% within one
#   call on 2026-11-27).
# Results in $OUT: runs.csv (tasp, measured and predicted), baseline.csv, best.md, report.txt (tasp report), on a forced
# fabric fabric-steps.csv and fabric.profile.yaml (its NCCL steps here and the profile fitted to them); logs.tgz holds
# the rest (build and run logs, report/), as the device tool brings back 8 files.
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
PASS=${1:-fwd+bwd}; ITERS=${2:-5}
shift $(( $# < 2 ? $# : 2 ))
HEAT=${HEAT_MS:-2000}
[ "$N" -ge 2 ] || { echo "compare.sh needs 2 or more GPUs"; exit 2; }
device_info
build tasp
fabric_profile
if [ "${FABRIC:-nvlink}" = socket ] && [ "${MEASURE_IN_RUN:-1}" != 0 ]; then
  case " ${TASP_RUN_ARGS:-} " in *" --measure-fabric "*) ;; *) TASP_RUN_ARGS="${TASP_RUN_ARGS:-} --measure-fabric" ;; esac
fi
[ $# -eq 0 ] && set -- set:$([ "$N" -ge 4 ] && echo anchor || echo long)
list=$(workloads "$@") || exit 2
mapfile -t cfgs <<< "$list"
# baselines -w W...: the PyTorch baselines on these workloads, appended to baseline.csv (BASELINES=none: none).
baselines() {
  [ "${BASELINES:-}" = none ] && return 0
  timeout 600 python3 tools/gpu/lib/torch_ring.py "$@" --kernel "${KERNELS:-cudnn}" --algo "${BASELINES:-ring,ulysses,allgather}" \
    --iters "$ITERS" --heat-ms "$HEAT" --csv "$OUT/b.csv" 2>&1 | tee -a "$OUT/baseline.txt"
  [ -f "$OUT/b.csv" ] && tail -n +2 "$OUT/b.csv" | sed "s/\$/,$round/" >> "$OUT/baseline.csv" && rm -f "$OUT/b.csv"
}
# tasp_runs W: every scheme of SCHEMES on workload W, measured and predicted, appended to runs.csv.
tasp_runs() {
  local w=$1 s args out m b tr sim pc p
  for s in ${SCHEMES:-$(schemes_for "$w")}; do
    args=(-s $s); [ $s = usp ] && args+=(--ulysses 2 --inner hamilton)
    # A run that measures its fabric keeps the steps it measured (into logs.tgz), for `tasp calibrate --fit` after.
    case " ${TASP_RUN_ARGS:-} " in *" --measure-fabric "*) args+=(--fabric-csv "$OUT/fabric-run-$((++fabric_runs)).csv") ;; esac
    out=$(timeout 300 $T run --backend cuda -t $TOPO "${args[@]}" -w "$w" --pass $PASS --iters "$ITERS" --warmup 2 --heat-ms "$HEAT" \
        --profile "$PROFILE" ${TASP_RUN_ARGS:-} 2>&1 | tee -a "$OUT/runs.log")
    m=$(echo "$out" | ms_of)
    b=$(echo "$out" | bound_ms)
    # How its allgather steps ran, from the run's own line (tasp report predicts each row so).
    case $out in *"as NCCL collectives"*) tr=collectives sim=(--collectives) ;; *) tr=sendrecv sim=(--sendrecv) ;; esac
    pc=$(echo "$out" | pieces_of)
    # A run that measured the fabric itself (--measure-fabric) predicted itself with the profile refitted to it.
    case " ${TASP_RUN_ARGS:-} " in
      *" --measure-fabric "*) p=$(echo "$out" | run_predicted_ms) ;;
      *) p=$(predict_ms -t $TOPO "${args[@]}" "${sim[@]}" $(pieces_flags $pc) -w "$w" --pass $PASS --profile "$PROFILE") ;;
    esac
    [ "$m" != 0 ] && echo "\"$w\",$s,$m,$p,$N,$PASS,${FABRIC:-nvlink},${auto:-},$b,$tr,$pc,$round" | tee -a "$OUT/runs.csv"
  done
}
fabric_runs=0
echo "config,scheme,measured_ms,predicted_ms,ranks,pass,fabric,auto,bound_ms,transport,pieces,round" > "$OUT/runs.csv"
echo "config,kernel,algo,fwd_ms,fwd_bwd_ms,ranks,round" > "$OUT/baseline.csv"
for w in "${cfgs[@]}"; do
  auto=$(auto_scheme "$w" $PASS)
  for ((round = 1; round <= ${ROUNDS:-1}; ++round)); do
    round_order $round tasp torch
    for side in "${order[@]}"; do
      if [ $side = tasp ]; then tasp_runs "$w"; else baselines -w "$w"; fi
    done
  done
done
python3 - "$OUT/runs.csv" "$OUT/baseline.csv" "$PASS" <<'PY' | tee "$OUT/best.md"
import csv, statistics, sys
runs, base, pas = list(csv.DictReader(open(sys.argv[1]))), list(csv.DictReader(open(sys.argv[2]))), sys.argv[3]
col = "fwd_ms" if pas == "fwd" else "fwd_bwd_ms"
print(f"| config ({pas}, ms) | tasp best | ms | its bound | auto | auto ms | baseline best | ms | tasp / baseline |")
print("|---|---|---:|---:|---|---:|---|---:|---:|")
for c in dict.fromkeys(r["config"] for r in runs):
    mine = [r for r in runs if r["config"] == c]
    b = min(mine, key=lambda r: float(r["measured_ms"]))
    a = next((r for r in mine if r["scheme"] == r["auto"]), None)
    theirs = [r for r in base if r["config"] == c]
    t = min(theirs, key=lambda r: float(r[col])) if theirs else None
    tb = f"{t['algo']} ({t['kernel']}) | {float(t[col]):.3f} | {float(t[col]) / float(b['measured_ms']):.2f}x" if t else "- | - | -"
    am = f"{a['scheme']} | {float(a['measured_ms']):.3f}" if a else f"{mine[0]['auto'] or '-'} | -"
    bound = float(b.get("bound_ms") or 0)
    bd = f"{bound:.3f} ({float(b['measured_ms']) / bound:.2f}x)" if bound > 0 else "-"
    pieces = f" ({b['pieces']} pieces)" if b.get("pieces", "1") not in ("", "1") else ""
    print(f"| {c} | {b['scheme']}{pieces} | {float(b['measured_ms']):.3f} | {bd} | {am} | {tb} |")
# With ROUNDS > 1: each round's tasp best against its PyTorch best, and the median of those ratios.
rounds = sorted({r.get("round") or "1" for r in runs}, key=int)
if len(rounds) > 1:
    print(f"\n| config | tasp / baseline by round ({', '.join(rounds)}) | median |")
    print("|---|---|---:|")
    for c in dict.fromkeys(r["config"] for r in runs):
        ratios = []
        for k in rounds:
            mine = [float(r["measured_ms"]) for r in runs if r["config"] == c and (r.get("round") or "1") == k]
            theirs = [float(r[col]) for r in base if r["config"] == c and (r.get("round") or "1") == k]
            if mine and theirs:
                ratios.append(min(theirs) / min(mine))
        if ratios:
            print(f"| {c} | {' '.join(f'{x:.2f}x' for x in ratios)} | {statistics.median(ratios):.2f}x |")
PY
$T report --runs "$OUT/runs.csv" -t $TOPO --profile "$PROFILE" -o "$OUT/report" > "$OUT/report.txt" 2>&1
head -4 "$OUT/report.txt"
# A fabric measured first is measured again after the runs, and the runs read against that profile too (in logs.tgz:
# fabric-steps-after.csv, report-after/): loopback sockets' steps ran 0-26% slower after a call's runs than before
# them on 2x H200 (2026-11-27, docs/measurements/model.md), so which of the two predicts the runs says how far the
# fabric moved under them. FABRIC_AFTER=0 skips it.
if [ "$PROFILE" = "$OUT/fabric.profile.yaml" ] && [ "${FABRIC_AFTER:-1}" != 0 ]; then
  echo "== NCCL steps over ${FABRIC} again, after the runs"
  if measure_fabric fabric-steps-after.csv fabric-after.profile.yaml fabric-calibrate-after.log; then
    $T report --runs "$OUT/runs.csv" -t $TOPO --profile "$OUT/fabric-after.profile.yaml" -o "$OUT/report-after" 2>&1 |
      head -1 | sed 's/^/after the runs: /' | tee -a "$OUT/report.txt"
  else
    echo "calibrate --measure after the runs failed ($OUT/fabric-calibrate-after.log)"
  fi
fi
# Runs that measured the fabric themselves: their error against their own predictions (runs.csv's predicted_ms).
case " ${TASP_RUN_ARGS:-} " in *" --measure-fabric "*) python3 - "$OUT/runs.csv" <<'PY' | tee -a "$OUT/report.txt" ;;
import csv, statistics, sys
e = [abs(float(r["predicted_ms"]) / float(r["measured_ms"]) - 1) for r in csv.DictReader(open(sys.argv[1])) if float(r["predicted_ms"]) > 0]
if e:
    print(f"each run against the profile refitted to the steps it measured first: {len(e)} runs, median |error| "
          f"{100 * statistics.median(e):.1f}%, max {100 * max(e):.1f}%")
PY
esac
# What a report cites: the tables, the raw runs and baselines, the machine, and a fabric's measured steps and profile.
pack_logs best.md runs.csv baseline.csv device.txt report.txt fabric-steps.csv fabric.profile.yaml
