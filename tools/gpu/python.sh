#!/usr/bin/env bash
# Does tasp work from PyTorch on these GPUs, and how fast? Builds the C library (build-gpu/), then, one process per
# GPU under torchrun:
#   check  tests/python/gpu/check_attention.py: tasp.torch.attention (every token-parallel scheme, bf16/fp16, GQA,
#          MQA, window, documents) and the ring-flash-attention compat functions against one-GPU SDPA, fwd and bwd;
#   bench  python -m tasp.bench --baseline on CONFIGS (default: medium large large_seq xlarge qwen3_14b qwen3_32b),
#          tasp beside the PyTorch ring, Ulysses and all-gather -> $OUT/bench-NAME.json, $OUT/bench.md;
#   varlen python -m tasp.bench --varlen on VARLEN_CONFIGS (default: medium qwen3_14b): packed documents (nnscaler's
#          varlen benchmark's cuts), tasp beside one GPU running SDPA document by document (not in the default);
#   train  examples/train_tiny_llama.py, 50 steps on every GPU with tasp and on one GPU with SDPA, the same seed and
#          data; the losses compared step by step (within 1%) and both runs' tokens/s;
#   train-docs  the same with --docs 8: packed documents cut anew every step (one plan for all of them), not in the
#          default;
#   pip    `pip install --no-build-isolation --no-deps .` into a scratch prefix (the package as users install it);
#   (FABRIC=shm|socket: NCCL forced off NVLink; bench then runs tasp with a profile of that fabric, over sockets
#   measured by the bench's own ranks first (--measure-fabric; MEASURE_IN_RUN=0: once at the call's start), and
#   --collectives ${COLLECTIVES:-auto});
#   stall  tests/python/gpu/check_stall.py: a peer that stops calling, whose process exits, that never calls, or that
#          never measures the fabric with the others, ends the others' calls within the timeout;
#   overhead  the same plan from PyTorch (python -m tasp.bench) and through `tasp run`, fwd+bwd, B=1 H=32 D=128 causal
#          at S=16384 and 65536 (SHAPES=...), scheme allgather (SCHEMES="allgather ulysses" for more), one after the
#          other in this call -> $OUT/overhead.md;
#   profile  where overhead's difference goes: the first of SHAPES (or the named config CONFIG=NAME) from PyTorch
#          under torch.profiler (its kernel table, rank 0) and through `tasp run --steps` (its step timeline), the
#          scheme auto's unless SCHEME=... -> $OUT/profile.log (not in the default).
# Usage: tools/gpu/python.sh [check] [bench] [varlen] [train] [train-docs] [pip] [stall] [overhead] [profile]
#   (default: all but varlen, train-docs and profile)
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
[ "$N" -ge 2 ] || { echo "python.sh needs 2 or more GPUs"; exit 2; }
steps=" ${*:-check bench train pip stall overhead} "
device_info
build tasp_c tasp
# On a forced fabric (FABRIC=shm|socket) the bench's tasp takes its choices, and its allgather's transport, from a
# profile measured there (COLLECTIVES=auto by default then; true or false to force).
# Over sockets the bench measures the fabric in its own processes first (--measure-fabric; MEASURE_IN_RUN=0: a profile
# measured once at the call's start), whose rate a minute later may be 1.25x off (docs/measurements/model.md).
bench_fabric=()
if [ "${FABRIC:-nvlink}" = socket ] && [ "${MEASURE_IN_RUN:-1}" != 0 ]; then
  prof=$PROFILE; [[ $prof == /* ]] || prof=$PWD/$prof  # the base whose comm each run refits
  bench_fabric=(--measure-fabric --profile "$prof" --collectives "${COLLECTIVES:-auto}")
elif [ "${FABRIC:-nvlink}" != nvlink ]; then
  fabric_profile
  prof=$PROFILE; [[ $prof == /* ]] || prof=$PWD/$prof
  bench_fabric=(--profile "$prof" --collectives "${COLLECTIVES:-auto}")
fi
export TASP_LIBRARY=$PWD/build-gpu/bindings/libtasp_c.so PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
fail=0
launch=(torchrun --standalone --nproc_per_node="$N")
if [[ $steps == *" check "* ]]; then
  timeout 600 "${launch[@]}" tests/python/gpu/check_attention.py 2>&1 | tee "$OUT/check_attention.log"
  [ "${PIPESTATUS[0]}" = 0 ] || fail=1
  echo "check_attention: $(grep -c '^PASS' "$OUT/check_attention.log") PASS, $(grep -c '^FAIL' "$OUT/check_attention.log") FAIL"
fi
if [[ $steps == *" bench "* ]]; then
  for c in ${CONFIGS:-medium large large_seq xlarge qwen3_14b qwen3_32b}; do
    timeout 300 "${launch[@]}" -m tasp.bench --config "$c" --baseline --timing-runs "${ITERS:-5}" --json "$OUT/bench-$c.json" \
      ${bench_fabric[@]+"${bench_fabric[@]}"} 2>&1 |
      tee -a "$OUT/bench.log" | grep -E "^tasp / best|^# tasp:"
  done
  python3 - "$OUT" <<'PY' | tee "$OUT/bench.md"
import glob, json, sys
print("| config | tasp | fwd+bwd ms | best baseline | fwd+bwd ms | tasp / baseline | tokens/s | peak GiB | efficiency |")
print("|---|---|---:|---|---:|---:|---:|---:|---:|")
for f in sorted(glob.glob(sys.argv[1] + "/bench-*.json")):
    j = json.load(open(f)); t = j["rows"][0]; r = j["vs_best_baseline"] or {}
    b = next((x for x in j["rows"] if x["name"] == r.get("baseline")), None)
    eff = f"{100 * t['parallel_efficiency']:.0f}%" if "parallel_efficiency" in t else "-"
    print(f"| {j['config']} | {t['name']} | {t['fwd_bwd_ms']:.3f} | {r.get('baseline', '-')} | "
          f"{b['fwd_bwd_ms'] if b else 0:.3f} | {r.get('fwd_bwd', 0):.2f}x | {t['tokens_per_s']:.0f} | "
          f"{max(t['torch_peak_gib'], t['device_used_gib']):.2f} | {eff} |")
PY
fi
if [[ $steps == *" varlen "* ]]; then
  for c in ${VARLEN_CONFIGS:-medium qwen3_14b}; do
    timeout 300 "${launch[@]}" -m tasp.bench --config "$c" --varlen --timing-runs "${ITERS:-5}" \
      --json "$OUT/varlen-$c.json" 2>&1 | tee -a "$OUT/varlen.log" | grep -E "^\| tasp|^# tasp"
  done
fi
if [[ $steps == *" train "* ]]; then
  timeout 400 "${launch[@]}" examples/train_tiny_llama.py --mode tasp --json "$OUT/train-tasp.json" > "$OUT/train-tasp.log" 2>&1 || fail=1
  timeout 400 python3 examples/train_tiny_llama.py --mode sdpa --json "$OUT/train-sdpa.json" > "$OUT/train-sdpa.log" 2>&1 || fail=1
  tail -n 1 "$OUT/train-tasp.log" "$OUT/train-sdpa.log"
  python3 examples/train_tiny_llama.py --compare "$OUT/train-tasp.json" "$OUT/train-sdpa.json" || fail=1
fi
if [[ $steps == *" train-docs "* ]]; then
  timeout 400 "${launch[@]}" examples/train_tiny_llama.py --mode tasp --docs 8 --json "$OUT/train-docs-tasp.json" > "$OUT/train-docs-tasp.log" 2>&1 || fail=1
  timeout 400 python3 examples/train_tiny_llama.py --mode sdpa --docs 8 --json "$OUT/train-docs-sdpa.json" > "$OUT/train-docs-sdpa.log" 2>&1 || fail=1
  tail -n 1 "$OUT/train-docs-tasp.log" "$OUT/train-docs-sdpa.log"
  python3 examples/train_tiny_llama.py --compare "$OUT/train-docs-tasp.json" "$OUT/train-docs-sdpa.json" || fail=1
fi
if [[ $steps == *" pip "* ]]; then
  timeout 600 python3 -m pip install --no-build-isolation --no-deps --prefix /tmp/tasp-pip . > "$OUT/pip.log" 2>&1 &&
    echo "pip install: ok ($(find /tmp/tasp-pip -name libtasp_c.so | head -1))" || { echo "pip install: failed"; tail -20 "$OUT/pip.log"; fail=1; }
fi
if [[ $steps == *" overhead "* ]]; then
  echo "| scheme | S | tasp.torch fwd+bwd ms | tasp run fwd+bwd ms | PyTorch path / tasp run |" > "$OUT/overhead.md"
  echo "|---|---:|---:|---:|---:|" >> "$OUT/overhead.md"
  for scheme in ${SCHEMES:-allgather}; do
    for S in ${SHAPES:-16384 65536}; do
      timeout 300 "${launch[@]}" -m tasp.bench --seqlen "$S" --nheads 32 --head-dim 128 --batch-size 1 --causal \
        --scheme "$scheme" --collectives false --timing-runs "${ITERS:-5}" --json "$OUT/overhead-$scheme-$S.json" >> "$OUT/overhead.log" 2>&1
      # Both sides as grouped send/recv (--collectives false, --sendrecv), whatever their profiles would pick.
      r=$(timeout 300 $T run --backend cuda -t $TOPO -s "$scheme" -w "B=1,S=$S,H=32,D=128,causal" --pass fwd+bwd --sendrecv \
          --iters "${ITERS:-5}" --warmup 2 --heat-ms 2000 --profile "$PROFILE" 2>&1 | tee -a "$OUT/overhead.log" | ms_of)
      python3 - "$OUT/overhead-$scheme-$S.json" "$scheme" "$S" "$r" <<'PY' | tee -a "$OUT/overhead.md"
import json, sys
t = json.load(open(sys.argv[1]))["rows"][0]["fwd_bwd_ms"]
run = float(sys.argv[4])
print(f"| {sys.argv[2]} | {sys.argv[3]} | {t:.3f} | {run:.3f} | {t / run if run else 0:.3f}x |")
PY
    done
  done
fi
if [[ $steps == *" profile "* ]]; then
  S=$(echo ${SHAPES:-16384} | cut -d' ' -f1)
  if [ -n "${CONFIG:-}" ]; then bench_w=(--config "$CONFIG"); run_w=(-c "$CONFIG"); what="-c $CONFIG"
  else bench_w=(--seqlen "$S" --nheads 32 --head-dim 128 --batch-size 1 --causal); run_w=(-w "B=1,S=$S,H=32,D=128,causal"); what="${run_w[*]}"; fi
  s=${SCHEME:-$($T plan -t $TOPO -s auto $what --pass fwd+bwd --sendrecv --profile "$PROFILE" -o /dev/null 2>&1 | grep -oE -- "-> [a-z-]+" | head -1 | cut -c4-)}
  timeout 300 "${launch[@]}" -m tasp.bench "${bench_w[@]}" --scheme "${s:-allgather}" --timing-runs "${ITERS:-5}" \
    --timing-method profiler --no-single 2>&1 | grep -v "^W[0-9]\|^\*\*\*\|UserWarning\|return func" > "$OUT/profile.log"
  timeout 300 $T run --backend cuda -t $TOPO -s "${s:-allgather}" "${run_w[@]}" --pass fwd+bwd --sendrecv \
    --iters "${ITERS:-5}" --warmup 2 --heat-ms 2000 --profile "$PROFILE" --steps >> "$OUT/profile.log" 2>&1
  cut -c1-200 "$OUT/profile.log"
fi
if [[ $steps == *" stall "* ]]; then
  for how in stall exit first measure; do
    timeout 120 "${launch[@]}" tests/python/gpu/check_stall.py $how 2>&1 | tee -a "$OUT/stall.log" | grep -E "^(PASS|FAIL)"
    [ "${PIPESTATUS[0]}" = 0 ] || fail=1
  done
fi
exit $fail
