#!/usr/bin/env bash
# Is this build correct on this machine's GPUs? Build, the GPU unit tests (kernels on both forward paths,
# executor), compute-sanitizer memcheck of the small kernel cases, and on 2+ GPUs every scheme's fwd+bwd through the
# cuda backend against fp64 on the CPU (small shapes) or the whole problem on one GPU: GQA/MQA, lengths that do not
# divide, packed documents and windows, head-parallel plans (usp from 4 GPUs), one process per GPU under mpirun.
# Usage: tools/gpu/check.sh [quick|multi]   quick: no memcheck, no mma.sync path, one shape per scheme; multi: as
#   quick without the unit tests (the multi-GPU checks alone: a box of 4 or 8 GPUs, where its time is scarce).
# Logs in $OUT (check.log: one line per run); exits 1 when anything failed.
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
quick=0; multi=0
case ${1:-} in quick) quick=1 ;; multi) quick=1 multi=1 ;; esac
device_info
if [ $multi = 1 ]; then build tasp; else build tasp tasp_kernel_tests tasp_executor_tests; fi
grep -E "spill stores [1-9]" -B2 "$OUT/build.log" | grep -E "Compiling entry" | sed 's/^/spills in: /' | head -5
fail=0
note() { echo "$*" | tee -a "$OUT/check.log"; case $* in *FAIL*|*rror*|*" 0 tests passed"*) fail=1 ;; esac; }
# check LABEL TIMEOUT COMMAND...: one --check run; a run that prints no PASS (a crash, a timeout) counts as failed.
check() {
  local label=$1 secs=$2 r
  shift 2
  r=$(timeout "$secs" "$@" 2>&1 | grep -E "PASS|FAIL|rror" | head -2 | tr '\n' ' ')
  case $r in *PASS*) ;; *) r="FAIL (no check printed) $r" ;; esac
  note "$label: $r"
}

if [ $multi = 0 ]; then
  echo "== GPU unit tests"
  timeout 600 ctest --test-dir build-gpu -L gpu --timeout 300 > "$OUT/gpu-tests.log" 2>&1
  note "gpu tests: $(grep -E 'tests passed' "$OUT/gpu-tests.log")"
  grep -E "\*\*\*Failed|Timeout" "$OUT/gpu-tests.log" | head -10
fi
if [ $quick = 0 ]; then
  TASP_ATTN_PATH=mma timeout 300 build-gpu/tests/tasp_kernel_tests --gtest_filter='AttentionGpu.*' > "$OUT/tests-mma.log" 2>&1
  note "forward tests on the mma.sync path: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/tests-mma.log" | tr '\n' ' ')"
  timeout 600 compute-sanitizer --tool memcheck build-gpu/tests/tasp_kernel_tests \
    --gtest_filter='*OneToken*:*CausalWith*:AttentionBwdGpu.PiecesAnd*:AttentionBwdGpu.DeterministicMatches*:*GqaHeadsPerCta*' \
    > "$OUT/memcheck.log" 2>&1
  note "memcheck: $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | head -1)"
fi
[ "$N" -ge 2 ] || { echo "one GPU: no multi-GPU checks"; exit $fail; }

echo "== every scheme fwd+bwd on $N GPUs ($TOPO) against fp64 (first shape) or the whole problem on one GPU"
shapes=("B=1,S=$((N * 2 * 150)),H=4,Hkv=2,D=64" "B=2,S=$((N * 2 * 1000 + 7)),H=8,Hkv=2,D=128")
[ $quick = 0 ] && shapes+=("B=1,S=$((N * 2 * 1000)),H=16,Hkv=$N,D=128" "B=1,S=$((N * 1000 + 2 * N)),H=8,Hkv=1,D=128")
for shape in "${shapes[@]}"; do
  for mask in "" ",causal"; do
    w=$shape$mask
    for s in $(schemes_for "$w"); do
      args=(-s $s); [ $s = usp ] && args+=(--ulysses 2 --inner hamilton)
      check "$s $w" 120 $T run --backend cuda -t $TOPO "${args[@]}" -w "$w" --pass fwd+bwd --check --iters 2 --warmup 1
    done
  done
done
echo "== head groups (the all-to-alls pipelined by heads): ulysses with 1, 2 and 4 groups, GQA and replicated K/V heads"
for wg in "B=2,S=$((N * 1000 + 6)),H=8,Hkv=4,D=128,causal:1 2 4" "B=1,S=$((N * 512)),H=16,Hkv=2,D=64:1 2"; do
  w=${wg%%:*}
  for hg in ${wg#*:}; do
    h=$(echo "$w" | grep -oE 'H=[0-9]+' | cut -c3-)
    (( (h / hg) % N == 0 )) || continue  # each group's heads split over the GPUs
    check "ulysses --head-groups $hg $w" 120 $T run --backend cuda -t $TOPO -s ulysses --head-groups $hg -w "$w" --pass fwd+bwd --check --iters 2 --warmup 1
  done
done
echo "== allgather's gather and reduce-scatter each way (--collectives: NCCL collectives, one all-gather and one"
echo "   reduce-scatter or one broadcast and one reduce a root, --sendrecv: grouped send/recv; the runs above take"
echo "   whichever the profile times faster)"
# (MHA: the gathered pieces' dK/dV written by the kernel in 16 bits into the reduce-scatter's or the sends' staging;
#  fp16: not, the staging travels as bf16)
for w in "B=1,S=$((N * 2 * 150)),H=4,Hkv=2,D=64,causal" "B=2,S=$((N * 2 * 1000 + 7)),H=8,Hkv=2,D=128" \
         "B=2,S=$((N * 2 * 1000 + 7)),H=8,D=128,causal" "B=2,S=$((N * 2 * 1000 + 7)),H=8,D=128,causal,fp16"; do
  for f in "--collectives --one-comm" "--collectives --root-comms" --sendrecv; do
    check "allgather $f $w" 120 $T run --backend cuda -t $TOPO -s allgather $f -w "$w" --pass fwd+bwd --check --iters 2 --warmup 1
  done
done
echo "== allgather pruned for the causal mask (--prune-plain: pieces by chunk, the late chunk's kept home), each transport"
for w in "B=2,S=$((N * 2 * 1000 + 8)),H=8,D=128,causal" "B=1,S=$((N * 4 * 300)),H=8,Hkv=2,D=64,causal,fp16"; do
  for f in "--collectives --root-comms --gather-steps 3,1" "--collectives --one-comm --gather-pieces 2" "--sendrecv --gather-steps 2,1,1"; do
    check "allgather --prune-plain $f $w" 120 $T run --backend cuda -t $TOPO -s allgather --prune-plain $f -w "$w" \
      --pass fwd+bwd --check --iters 2 --warmup 1
  done
done
echo "== queries moved to keys (--move-queries: rank 0's late chunk computed at rank 1; 2 ranks), each transport"
for w in "B=2,S=$((2 * 2 * 1000 + 8)),H=8,D=128,causal" "B=1,S=$((2 * 4 * 300)),H=8,Hkv=2,D=64,causal,fp16" "B=1,S=4000,H=4,D=80,causal"; do
  for f in "--collectives --root-comms --gather-pieces 4" "--collectives --one-comm --gather-pieces 2" "--sendrecv --gather-pieces 2"; do
    check "allgather --move-queries $f $w" 120 $T run --backend cuda -t complete:2 -s allgather --move-queries $f -w "$w" \
      --pass fwd+bwd --check --iters 2 --warmup 1
  done
done
echo "== the executor's defaults turned off (TASP_TRANSFERS_FIRST=0: a step's kernel does not wait for its NCCL calls to"
echo "   be next; TASP_REDUCE_AS_BCAST=0: a 2-rank reduce one a root as ncclReduce, not a broadcast from the other rank)"
for v in TASP_TRANSFERS_FIRST=0 TASP_REDUCE_AS_BCAST=0; do
  w="B=2,S=$((N * 3 * 1000 + 7)),H=8,D=128,causal"
  check "$v allgather --gather-steps 2,1,1 --root-comms $w" 120 env $v $T run --backend cuda -t $TOPO -s allgather \
    --gather-steps 2,1,1 --collectives --root-comms -w "$w" --pass fwd+bwd --check --iters 2 --warmup 1
done
echo "== allgather in pieces (--gather-pieces: each piece gathered and reduce-scattered beside the compute on the ones"
echo "   before; as collectives, one per piece into piece-major slots), kept K/V and gathered again"
for w in "B=2,S=$((N * 3 * 1000 + 7)),H=8,Hkv=2,D=128,causal" "B=1,S=$((N * 2 * 300)),H=4,D=64"; do
  for f in "--collectives --one-comm" "--collectives --root-comms" --sendrecv; do
    for P in 2 3; do
      check "allgather --gather-pieces $P $f $w" 120 $T run --backend cuda -t $TOPO -s allgather --gather-pieces $P $f \
        -w "$w" --pass fwd+bwd --check --iters 2 --warmup 1
    done
  done
  check "allgather --gather-pieces 2 --collectives --memory-budget 0.001 $w" 120 $T run --backend cuda -t $TOPO -s allgather \
    --gather-pieces 2 --collectives --memory-budget 0.001 -w "$w" --pass fwd+bwd --check --iters 2 --warmup 1
done
echo "== plain masks pruned on request (--prune-plain: only the K/V a rank's queries see; partial dK/dV home once)"
for w in "B=2,S=$((N * 2 * 1000 + 7)),H=8,Hkv=2,D=128,causal" "B=1,S=$((N * 2 * 150)),H=4,Hkv=2,D=64"; do
  for s in $(schemes_for "$w"); do
    case $s in allgather|ulysses|usp) continue ;; esac  # not pruned (allgather keeps its K/V; head-parallel: no pieces)
    check "$s --prune-plain $w" 120 $T run --backend cuda -t $TOPO -s $s --prune-plain -w "$w" --pass fwd+bwd --check --iters 2 --warmup 1
  done
done
echo "== what bf16 accumulators cost a ring in accuracy (dK, dV against one GPU; fp32 beside them)"
for w in "B=1,S=$((N * 2 * 2048)),H=16,Hkv=4,D=128,causal" "B=1,S=$((N * 2 * 2048)),H=16,D=128,causal"; do
  for acc in fp32 bf16; do  # (MHA bf16: each first hop's sums written by the kernel in 16 bits)
    r=$(timeout 120 $T run --backend cuda -t $TOPO -s zigzag --accumulator $acc -w "$w" --pass fwd+bwd --check --iters 2 --warmup 1 2>&1)
    note "zigzag --accumulator $acc $w: $(echo "$r" | grep -oE 'PASS|FAIL' | head -1) ($(echo "$r" | grep -E '^ +d[kv] ' | awk '{print $1, $4}' | tr '\n' ' '))"
  done
done
echo "== masks: packed documents and windows"
masked=("B=2,S=8192,H=8,D=128,causal,docs=3000+1+4000+1191" "B=1,S=8191,H=8,Hkv=2,D=64,causal,window=300")
[ $quick = 0 ] && masked+=("B=1,S=8192,H=8,Hkv=1,D=64,window=500:40" "B=1,S=1200,H=2,D=64,causal,docs=500+1+699,window=100")
for w in "${masked[@]}"; do
  for s in $(schemes_for "$w"); do
    [ $s = usp ] && continue
    check "$s $w" 120 $T run --backend cuda -t $TOPO -s $s -w "$w" --pass fwd+bwd --check --iters 2 --warmup 1
  done
done
if command -v mpirun > /dev/null; then
  echo "== one process per GPU (mpirun)"
  w="B=1,S=$((N * 2 * 1680)),H=32,Hkv=8,D=128,causal"
  for s in zigzag hamilton; do
    check "mpirun $s $w" 180 mpirun --allow-run-as-root --oversubscribe --bind-to none -np $N -x NCCL_NVLS_ENABLE $T run --backend cuda \
      -t $TOPO -s $s -w "$w" --pass fwd+bwd --check --iters 3 --warmup 1
  done
fi
if command -v mpirun > /dev/null; then
  echo "== a stalled rank ends the run within its deadline (mpirun, the last rank stopped with SIGSTOP, --timeout 10)"
  t0=$(date +%s)
  mpirun --allow-run-as-root --oversubscribe --bind-to none -np $N -x NCCL_NVLS_ENABLE $T run --backend cuda -t $TOPO -s zigzag \
    -w "B=1,S=$((N * 2 * 1680)),H=32,Hkv=8,D=128,causal" --pass fwd+bwd --iters 100000 --warmup 1 --timeout 10 \
    > "$OUT/stall.log" 2>&1 &
  launcher=$!
  sleep 8
  victim=$(pgrep -f "^$T run --backend cuda" | sort -n | tail -1)  # a rank (not mpirun, whose line starts otherwise)
  [ -n "$victim" ] && kill -STOP "$victim"
  ( sleep 60; kill -9 "$launcher" 2> /dev/null; [ -n "$victim" ] && kill -CONT "$victim" 2> /dev/null ) &
  wait "$launcher"; rc=$?
  secs=$(( $(date +%s) - t0 ))
  [ -n "$victim" ] && kill -CONT "$victim" 2> /dev/null
  why=$(grep -m1 -oE "tasp: rank [0-9]+: .*" "$OUT/stall.log" | cut -c1-160)
  if [ "$rc" != 0 ] && [ "$secs" -lt 40 ] && [ -n "$why" ]; then r=PASS; else r=FAIL; fi
  note "stalled rank under mpirun: $r (rc $rc after ${secs} s)"
  echo "  its message: $why"
fi
if [ $multi = 0 ] && python3 -c "import torch" 2> /dev/null; then
  echo "== the PyTorch baselines (lib/torch_ring.py) against one-GPU autograd"
  timeout 300 python3 tools/gpu/lib/torch_ring.py -w "B=1,S=$((N * 2 * 512)),H=8,Hkv=2,D=128,causal" -w "B=2,S=$((N * 1024)),H=8,D=64" \
    --kernel cudnn --algo ring,ulysses,allgather --iters 1 --warmup 1 --check > "$OUT/baselines.log" 2>&1
  grep -E "fwd\+bwd|error" "$OUT/baselines.log" | while read -r line; do
    ok=$(python3 -c "import re,sys; e=[float(x) for x in re.findall(r'(?:out|dq|dk|dv) ([0-9.e+-]+)', sys.argv[1])]; print('PASS' if len(e) == 4 and max(e) < 2e-2 else 'FAIL')" "$line")
    note "baseline $line: $ok"
  done
fi
echo "checks: $(grep -c ': PASS' "$OUT/check.log") runs PASS, $(grep -cE 'FAIL|rror' "$OUT/check.log") failed"
exit $fail
