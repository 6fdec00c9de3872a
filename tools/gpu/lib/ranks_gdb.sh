#!/usr/bin/env bash
# Runs a torch.distributed script as N processes by hand (the environment torchrun would set), each under gdb where
# the machine has it (a crash prints every thread's native stack) and with Python's faulthandler (the Python stack):
# for a crash that torchrun reports only as "Signal 11". Logs in $OUT/rankR.log.
# Usage: tools/gpu/lib/ranks_gdb.sh N SCRIPT [ARGS...]
set -uo pipefail
n=$1; shift
OUT=${OUT:-/tmp/tasp-out}
mkdir -p "$OUT"
export MASTER_ADDR=127.0.0.1 MASTER_PORT=${MASTER_PORT:-29533} WORLD_SIZE=$n LOCAL_WORLD_SIZE=$n PYTHONFAULTHANDLER=1
gdb_cmd=()
command -v gdb > /dev/null && gdb_cmd=(gdb -q -batch -ex "set pagination off" -ex run -ex "thread apply all bt 30" --args)
[ ${#gdb_cmd[@]} = 0 ] && echo "no gdb here: Python stacks only"
pids=()
for ((r = 0; r < n; ++r)); do
  RANK=$r LOCAL_RANK=$r "${gdb_cmd[@]}" python3 "$@" > "$OUT/rank$r.log" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit $rc
