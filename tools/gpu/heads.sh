#!/usr/bin/env bash
# Head-parallel schemes on the cuda backend (issue 15; device tool, 2 or 4 H200s): ulysses and usp checked
# against fp64 / the whole problem on one GPU, the two all-to-all implementations timed against each other,
# and every scheme timed fwd+bwd beside the simulator's prediction on N GPUs.
# Usage: tools/gpu/heads.sh checks|a2a|table N [ITERS]     Logs to $OUT; table rows also to stdout.
set -uo pipefail
source "$(dirname "$0")/env.sh"
WHAT=$1; N=$2; ITERS=${3:-5}
export CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((N - 1)))
nvidia-smi -L | head -"$N" > "$OUT/device.txt"
[ -x build-gpu/tools/tasp ] || tools/gpu/build.sh tasp || exit 1
T=build-gpu/tools/tasp
case $N in 4) TOPO=h200-hgx-4 ;; *) TOPO=complete:$N ;; esac

case $WHAT in
checks)
  echo "== head-parallel checks on $N GPUs (fwd+bwd)"
  run() {  # scheme-args... -- workload
    $T run --backend cuda -t $TOPO "$@" --pass fwd+bwd --check --iters 2 --warmup 1 2>&1 |
      grep -E "PASS|FAIL|rror" | sed "s/^/$* : /"
  }
  for shape in "B=2,S=$((N * 2 * 150)),H=8,Hkv=2,D=64" "B=1,S=$((N * 2 * 1000)),H=16,Hkv=$N,D=128" "B=1,S=$((N * 1000 + 2 * N)),H=8,Hkv=1,D=128"; do
    for mask in "" ",causal"; do
      run -s ulysses -w "$shape$mask"
      [ "$N" -ge 4 ] && for inner in ring zigzag hamilton allgather; do
        [ $inner = zigzag ] && [ -z "$mask" ] && continue
        run -s usp --ulysses 2 --inner $inner -w "$shape$mask"
      done
    done
  done
  run -s ulysses --a2a sendrecv -w "B=1,S=$((N * 2 * 1000)),H=16,Hkv=2,D=128,causal"
  ;;
a2a)
  echo "== ncclAlltoAll vs grouped send/recv, ulysses fwd+bwd on $N GPUs (median of $ITERS)"
  for w in "B=1,H=32,D=128,S=16384,causal" "B=1,H=32,D=128,S=65536,causal" "B=1,H=32,Hkv=8,D=128,S=131072,causal" "B=8,H=32,D=128,S=4096"; do
    for m in alltoall sendrecv; do
      r=$($T run --backend cuda -t $TOPO -s ulysses -w "$w" --a2a $m --pass fwd+bwd --iters "$ITERS" --warmup 2 --steps 2>&1 | tee -a "$OUT/a2a.log")
      med=$(grep -oE "median [0-9.]+ us" <<< "$r" | grep -oE "[0-9.]+")
      # the all-to-all steps: transfer-only rows of the step table (fwd 0 and the last fwd, bwd 0 and the last bwd)
      a2a=$(awk '/pass step/{on=1;next} on && NF==5 && $4<1 {s+=$3} END{print s+0}' <<< "$r")
      echo "$w,$m,median_us=$med,a2a_comm_us=$a2a"
    done
  done
  ;;
table)
  echo "== every scheme fwd+bwd on $N GPUs ($TOPO): measured (median of $ITERS after 500 ms heat) vs predicted"
  echo "config,scheme,measured_ms,predicted_ms"
  for w in "B=1,H=32,D=128,S=65536,causal" "B=1,H=32,Hkv=8,D=128,S=131072,causal" "B=1,H=32,D=128,S=32768" "B=4,H=8,D=128,S=16384,causal"; do
    schemes="ring zigzag hamilton ulysses"
    [ "$N" -ge 4 ] && schemes="$schemes usp"
    for s in $schemes; do
      case $w in *causal*) ;; *) [ $s = zigzag ] && continue ;; esac
      args=(-s $s)
      [ $s = usp ] && args+=(--ulysses 2 --inner hamilton)
      m=$($T run --backend cuda -t $TOPO "${args[@]}" -w "$w" --pass fwd+bwd --iters "$ITERS" --warmup 2 --heat-ms 500 2>&1 |
          tee -a "$OUT/table.log" | grep -oE "median [0-9.]+ us" | grep -oE "[0-9.]+")
      p=$($T simulate -t $TOPO "${args[@]}" -w "$w" --pass fwd+bwd --json "$OUT/sim.json" -q 2>/dev/null &&
          python3 -c "import json;print(json.load(open('$OUT/sim.json'))['schemes'][0]['total_us'])")
      echo "\"$w\",$s,$(python3 -c "print(round(${m:-0}/1e3,3))"),$(python3 -c "print(round(${p:-0}/1e3,3))")"
    done
  done
  echo "== PyTorch (cuDNN, FA2): the zigzag/plain ring and Ulysses on the MHA configurations, same GPUs"
  timeout 300 python3 tools/gpu/torch_ring.py -w B=1,H=32,D=128,S=4096,causal --algo ulysses --kernel cudnn --check --iters 1
  timeout 400 python3 tools/gpu/torch_ring.py -w B=1,H=32,D=128,S=65536,causal -w B=1,H=32,D=128,S=32768 \
    -w B=4,H=8,D=128,S=16384,causal --algo ring,ulysses --iters "$ITERS" --csv "$OUT/torch.csv"
  ;;
esac
