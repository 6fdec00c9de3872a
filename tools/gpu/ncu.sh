#!/usr/bin/env bash
# Where a kernel's warps stall, per source line and SASS instruction (Nsight Compute's warp-state sampling), on
# one Hopper GPU (the device tool). Builds tasp (the kernels are always compiled with -lineinfo), profiles one launch of the kernel
# matching REGEX inside `tasp bench kernel ARGS...`, and writes $OUT/ncu-source.csv.gz (ncu's source page, SASS
# with CUDA lines), $OUT/ncu-details.txt (speed of light, scheduler and warp-state sections) and
# $OUT/stalls.txt (tools/gpu/lib/ncu_stalls.py: the source lines with the most samples, by reason).
# Usage: tools/gpu/ncu.sh REGEX ARGS...
#   e.g. tools/gpu/ncu.sh attention_bwd --pass bwd --shape B=1,S=16384,H=32,D=128
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
regex=$1
shift
build tasp
run=($T bench kernel --iters 1 --warmup 0 "$@")
timeout 400 ncu --kernel-name "regex:$regex" --launch-count 1 --set full --import-source yes \
  -o "$OUT/prof" -f "${run[@]}" > "$OUT/ncu.log" 2>&1 || { tail -20 "$OUT/ncu.log"; exit 1; }
ncu -i "$OUT/prof.ncu-rep" --page details --section SpeedOfLight --section SchedulerStats \
  --section WarpStateStats --section Occupancy \
  --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis > "$OUT/ncu-details.txt" 2>&1
ncu -i "$OUT/prof.ncu-rep" --page source --csv --print-source cuda,sass > "$OUT/ncu-source.csv" 2>&1
# Tensor pipe, shared memory and L2 counters (the raw page, filtered): what the speed-of-light summary hides.
ncu -i "$OUT/prof.ncu-rep" --page raw 2>&1 | grep -iE "gmma|tensor_op|pipe_shared|data_pipe_lsu_wavefronts_mem_shared|lts__t_sectors_op_red|lts__t_sectors_op_atom|mio_throttle|sm__throughput|l1tex__throughput|sm__cycles_active.avg " > "$OUT/ncu-raw.txt"
python3 tools/gpu/lib/ncu_stalls.py "$OUT/ncu-source.csv" > "$OUT/stalls.txt"; head -45 "$OUT/stalls.txt"
gzip -f "$OUT/ncu-source.csv"
rm -f "$OUT/prof.ncu-rep"
