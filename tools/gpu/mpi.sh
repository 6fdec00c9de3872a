#!/usr/bin/env bash
# Multi-process check: the same binary as one process per GPU under mpirun, against one process for all.
set -uo pipefail
source "$(dirname "$0")/env.sh"
N=$(nvidia-smi -L | wc -l)
tools/gpu/build.sh tasp || exit 1
grep -E "multi-process|MPI" "$OUT/build.log" | head -3
T=build-gpu/tools/tasp
W=B=1,S=$((N * 2 * 1680)),H=32,D=128,causal
for s in zigzag hamilton; do
  echo "== $s one process"; $T run --backend cuda -t complete:$N -s $s -w $W --check --iters 10 --warmup 3 | grep -E "runs|check"
  echo "== $s mpirun -np $N"
  mpirun --allow-run-as-root --oversubscribe -np $N -x NCCL_NVLS_ENABLE $T run --backend cuda -t complete:$N -s $s -w $W \
    --check --iters 10 --warmup 3 2>&1 | grep -E "runs|check|error" | head -5
done
