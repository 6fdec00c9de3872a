#!/usr/bin/env bash
# temporary: allgather in steps of several pieces, checked on GPUs, then A/B on shm and sockets
source tools/gpu/lib/common.sh
build tasp
for tr in "--collectives --root-comms" "--collectives --one-comm" "--sendrecv"; do
  for w in B=2,S=4007,H=8,D=128,causal B=1,S=2400,H=8,Hkv=2,D=64; do
    r=$(timeout 90 $T run --backend cuda -t complete:2 -s allgather --gather-steps 2,1,1 $tr -w $w --pass fwd+bwd --check --iters 2 --warmup 1 2>&1 | grep -E "PASS|FAIL|rror" | head -2 | tr '\n' ' ')
    echo "steps 2,1,1 $tr $w: $r" | tee -a $OUT/check-steps.txt
  done
done
r=$(timeout 90 $T run --backend cuda -t complete:2 -s allgather --gather-steps 1,3 --memory-budget 0.001 -w B=2,S=4007,H=8,D=128,causal --pass fwd+bwd --check --iters 2 --warmup 1 2>&1 | grep -E "PASS|FAIL|rror|kept|gathered" | head -3 | tr '\n' ' ')
echo "steps 1,3 gathered again: $r" | tee -a $OUT/check-steps.txt
FABRIC=shm AB_TAG=shm ITERS=5 tools/gpu/ab-run.sh 2 '--gather-steps=2,1,1|--gather-steps=3,1|--gather-steps=4,2,1,1' allgather 'B=1,S=8192,H=32,D=128,causal' 'B=4,H=40,Hkv=8,D=128,S=16384,causal'
FABRIC=socket AB_TAG=socket ITERS=3 tools/gpu/ab-run.sh 2 '--gather-pieces=4|--gather-steps=2,1,1|--gather-steps=4,2,1,1' allgather 'B=4,H=40,Hkv=8,D=128,S=16384,causal' 'B=4,H=24,D=128,S=8192,causal'
