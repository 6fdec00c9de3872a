#!/usr/bin/env bash
# Does every named workload train on these GPUs? For each name `tasp configs` lists (or CONFIGS="a b ..."): the
# scheme `--scheme auto` picks with this machine's profile, then `tasp run --backend cuda --config NAME --pass fwd+bwd
# --check` on all GPUs (heated 2 s, median of 3), against the whole problem on one GPU (fp64 on the CPU for small
# ones). Writes $OUT/configs.md (scheme, check, fwd+bwd ms measured and predicted, tokens/s, GPU memory per rank
# measured and planned) and $OUT/configs.csv; exits 1 when a check fails or a run prints none.
# Usage: tools/gpu/configs.sh   (CONFIGS=..., SECONDS_PER_RUN=240; BUDGET_SECONDS=480: no new run starts after that,
#   and the names left are listed, for a later call with CONFIGS=)
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
[ "$N" -ge 2 ] || { echo "configs.sh needs 2 or more GPUs"; exit 2; }
device_info
build tasp
names=${CONFIGS:-$($T configs --json | python3 -c "import json,sys; print(' '.join(c['name'] for c in json.load(sys.stdin)))")}
fail=0
done_names=""
for c in $names; do
  if [ $SECONDS -gt "${BUDGET_SECONDS:-480}" ]; then left="${left:-} $c"; continue; fi
  done_names="$done_names $c"
  s=$($T plan -t $TOPO -s auto -c "$c" --pass fwd+bwd --profile "$PROFILE" -o /dev/null 2>&1 | grep -oE -- "-> [a-z-]+" | head -1 | cut -c4-)
  timeout "${SECONDS_PER_RUN:-240}" $T run --backend cuda -t $TOPO -s "${s:-allgather}" -c "$c" --pass fwd+bwd --check --iters 3 --warmup 1 \
    --heat-ms 2000 --profile "$PROFILE" --json "$OUT/cfg-$c.json" > "$OUT/cfg-$c.log" 2>&1
  predict_ms -t $TOPO -s "${s:-allgather}" -c "$c" --pass fwd+bwd --profile "$PROFILE" > "$OUT/cfg-$c.pred"
  r=$(grep -E "PASS|FAIL|rror" "$OUT/cfg-$c.log" | head -1)
  case $r in *PASS*) ;; *) fail=1 ;; esac
  echo "$c ${s:-?}: ${r:-no check printed}"
done
[ -n "${left:-}" ] && echo "not run (BUDGET_SECONDS): CONFIGS=\"${left# }\"" && fail=1
python3 - "$OUT" $done_names <<'PY' | tee "$OUT/configs.md"
import json, os, sys
out, names = sys.argv[1], sys.argv[2:]
csv = open(os.path.join(out, "configs.csv"), "w")
csv.write("config,scheme,check,fwd_bwd_ms,predicted_ms,tokens_per_s,gib_per_rank,planned_gib_per_rank\n")
print("| config | scheme | check | fwd+bwd ms | predicted ms | error | tokens/s | GiB per rank (planned) |")
print("|---|---|---|---:|---:|---:|---:|---:|")
for n in names:
    log = open(os.path.join(out, f"cfg-{n}.log")).read()
    check = "PASS" if "PASS" in log else "FAIL"
    try:
        j = json.load(open(os.path.join(out, f"cfg-{n}.json")))
    except (OSError, ValueError):
        print(f"| {n} | - | {check} (no result) | | | | | |"); continue
    ms = j.get("total_us", 0) / 1e3
    pred = float(open(os.path.join(out, f"cfg-{n}.pred")).read() or 0)
    gib = j.get("device_bytes_per_rank", 0) / 2**30
    plan_gib = j.get("predicted_memory_bytes_per_rank", 0) / 2**30
    err = f"{100 * (pred - ms) / ms:+.1f}%" if ms and pred else "-"
    print(f"| {n} | {j.get('scheme', '?')} | {check} | {ms:.3f} | {pred:.3f} | {err} | {j.get('tokens_per_s', 0):.0f} | {gib:.2f} ({plan_gib:.2f}) |")
    csv.write(f"{n},{j.get('scheme', '')},{check},{ms:.4f},{pred:.4f},{j.get('tokens_per_s', 0):.0f},{gib:.3f},{plan_gib:.3f}\n")
PY
exit $fail
