#!/usr/bin/env bash
# One process for every GPU, or one per GPU? `tasp run` drives all of a host's GPUs from one process (a thread each,
# NCCL's proxy threads of every rank in it); PyTorch and mpirun give each GPU its own process. On a forced fabric
# (FABRIC=socket: NCCL's socket threads copy every byte) the two may move bytes at different rates, which decides
# tasp against PyTorch where both move the same bytes (allgather, 2 GPUs, MHA: docs/measurements/executor.md,
# "What was measured and not kept"). The same run both ways, taking turns ROUNDS (3) times, then PyTorch's BASELINE (allgather) on the
# same GPUs, each heated HEAT_MS (2000) ms.
# Usage: tools/gpu/procs.sh [SCHEME] [WORKLOAD]   (default: allgather B=1,S=8192,H=32,D=128,causal; ITERS 5;
#   TASP_RUN_ARGS go to every tasp run) -> $OUT/procs.md (a row per round), $OUT/procs.log
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
[ "$N" -ge 2 ] || { echo "procs.sh needs 2 or more GPUs"; exit 2; }
command -v mpirun > /dev/null || { echo "procs.sh needs mpirun"; exit 2; }
scheme=${1:-allgather} w=${2:-B=1,S=8192,H=32,D=128,causal}
device_info
build tasp
run=(run --backend cuda -t $TOPO -s "$scheme" -w "$w" --pass fwd+bwd --iters "${ITERS:-5}" --warmup 2 --heat-ms "${HEAT_MS:-2000}"
     ${TASP_RUN_ARGS:-})
forward=(-x NCCL_NVLS_ENABLE)  # every NCCL_* of this shell (the fabric's) to each rank
for v in $(env | grep -oE '^NCCL_[A-Z0-9_]+'); do forward+=(-x "$v"); done
echo "| round | one process ms | a process per GPU ms | one / per GPU | PyTorch ${BASELINE:-allgather} ms |" > "$OUT/procs.md"
echo "|---:|---:|---:|---:|---:|" >> "$OUT/procs.md"
for ((r = 1; r <= ${ROUNDS:-3}; ++r)); do
  one=$(timeout 300 $T "${run[@]}" 2>&1 | tee -a "$OUT/procs.log" | ms_of)
  per=$(timeout 300 mpirun --allow-run-as-root --oversubscribe -np "$N" "${forward[@]}" $T "${run[@]}" 2>&1 |
        tee -a "$OUT/procs.log" | ms_of)
  timeout 300 python3 tools/gpu/lib/torch_ring.py -w "$w" --kernel cudnn --algo "${BASELINE:-allgather}" \
    --iters "${ITERS:-5}" --heat-ms "${HEAT_MS:-2000}" --csv "$OUT/b.csv" >> "$OUT/procs.log" 2>&1
  base=$(python3 -c "import csv,sys; r=list(csv.DictReader(open(sys.argv[1]))); print(f\"{float(r[0]['fwd_bwd_ms']):.3f}\")" \
         "$OUT/b.csv" 2> /dev/null); rm -f "$OUT/b.csv"
  ratio=$(python3 -c "print(f'{$one / $per:.3f}x' if $per else '-')")
  echo "| $r | $one | $per | $ratio | ${base:--} |" | tee -a "$OUT/procs.md"
done
