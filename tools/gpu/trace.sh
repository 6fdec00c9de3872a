#!/usr/bin/env bash
# Where does a kernel's time go? On one Hopper GPU, the kernel built with its phase clocks beside the plain build.
#   fwd: -DTASP_FWD_TRACE (lib/fwd_trace.py reads it): the forward on the short and long causal shapes and D=128 full,
#        each task's phases and how the SMs' time splits (start, walk, end, gaps, tail) and warpgroup 0's (waiting
#        between tasks, tile 0, walk, end). The short shapes run on the persistent grid; TRACE_ENV=TASP_FWD_PERSIST=0
#        traces them one task a CTA too. (A trace build's own rates include copying the clocks out after every launch:
#        the launch's length is the summary's globaltimer span.)
#   bwd: -DTASP_BWD_TRACE (lib/bwd_trace.py): the backward on the D=128/D=64 shapes, each warpgroup's phase cycles,
#        the tile period and the warpgroups' skew, and the CTAs' prologue and end, each in its parts (walk resolved,
#        maps fenced, first copies issued, first tile in; the other warpgroup's last dS^T, the last dQ, the dK/dV
#        stores, the staging read); D=256 (the wide kernel) its own phases (lib/bwd_trace.py --wide).
# Usage: tools/gpu/trace.sh fwd|bwd
#   VARIANTS="name:-DFLAG name2:-DFLAG2": each flag set built plain and traced, traced, and A/B'd against the plain
#   build (tools/gpu/ab.sh, ROUNDS=2 rounds); e.g. nostore:-DTASP_FWD_NOSTORE (the forward's epilogue stores left out),
#   nodq:-DTASP_BWD_WIDE_NODQ (the D=256 backward's dQ adds left out: what they cost), noload:-DTASP_BWD_NOLOAD (the
#   backward's Q/dO copies after the first two tiles left out: what the loads cost).
#   BASE_PATCH=file (git diff BASE -- kernels/ > file): the change's base built too (lib/build-base.sh) and A/B'd.
#   TRACE_ENV="VAR=1|VAR=2" (fwd): environment variants of the plain build traced too; AB_ENV (bwd): in the A/B too.
#   SHAPES="B=..,S=.. ..." (bwd): the shapes traced and A/B'd, instead of the D=128/D=64 S=16384 four.
#   TESTS=1: the plain build's GPU tests of that pass first (and, fwd, memcheck of the small ones); TESTS=all (bwd):
#   every plain variant's backward tests too, so that a variant measured faster is also checked in the same call.
# Everything goes to $OUT/trace.tar.gz (the device tool returns few files), the summaries also to stdout.
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
source tools/gpu/lib/trace-builds.sh
case ${1:-} in
fwd)
  trace_builds -DTASP_FWD_TRACE
  if [ "${TESTS:-0}" = 1 ]; then
    for path in sm90 mma; do
      TASP_ATTN_PATH=$path timeout 300 build-gpu/tests/tasp_kernel_tests --gtest_filter='AttentionGpu*' > "$OUT/tests-$path.log" 2>&1
      echo "tests ($path): $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/tests-$path.log" | tr '\n' ' ')"
      grep -E "Failure|FAILED  \]|what\(\)" "$OUT/tests-$path.log" | head -10
    done
    timeout 300 compute-sanitizer --tool memcheck build-gpu/tests/tasp_kernel_tests \
      --gtest_filter='AttentionGpu.*:-*Long*' > "$OUT/memcheck.log" 2>&1
    echo "memcheck: $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | head -1)"
  fi
  shapes=(B=8,S=2048,H=32,D=128,causal B=4,S=4096,H=32,D=128,causal B=1,S=16384,H=32,D=128,causal B=1,S=16384,H=32,D=128)
  names=(s2k s4k s16kc s16k)
  [ "${TASP_TRACE_QUICK:-0}" = 1 ] && shapes=("${shapes[0]}") names=("${names[0]}")  # all.sh quick: one shape
  IFS='|' read -ra envs <<< "${TRACE_ENV:-}"
  for b in "${builds[@]}"; do
    name=${b%%:*}
    case $name in *trace) ;; *) continue ;; esac
    for e in "" "${envs[@]}"; do
      [ -n "$e" ] && [ "$name" != trace ] && continue
      tag=${e//[^A-Za-z0-9]/_}
      for i in "${!shapes[@]}"; do
        f="$OUT/$name-${names[$i]}${tag:+-$tag}"
        env $e TASP_FWD_TRACE_FILE="$f.bin" timeout 120 build-$name/tools/tasp bench kernel --pass fwd --iters 5 --warmup 2 \
          --heat-ms 1000 --shape "${shapes[$i]}" > "$f.txt" 2>&1
        echo "== $name ${e:-} ${shapes[$i]}" | tee -a "$OUT/trace-summary.txt"
        python3 tools/gpu/lib/fwd_trace.py "$f.bin" | tee -a "$OUT/trace-summary.txt"
      done
    done
  done
  spec=$(ab_variants)
  ab_shapes=()
  for s in "${shapes[@]}" B=2,S=16384,H=16,D=64,causal B=1,S=12000,H=32,D=128,causal B=1,S=16384,H=32,D=80,causal; do ab_shapes+=(--shape "$s"); done
  [ -n "$spec" ] && OUT="$OUT" AB_TAG=trace tools/gpu/ab.sh fwd "${ROUNDS:-2}" "$spec" "${ab_shapes[@]}" | tee "$OUT/ab-summary.txt"
  ;;
bwd)
  trace_builds -DTASP_BWD_TRACE
  if [ "${TESTS:-0}" != 0 ]; then
    for b in "${builds[@]}"; do
      name=${b%%:*}
      [ -x "build-$name/tests/tasp_kernel_tests" ] || continue
      timeout 300 "build-$name/tests/tasp_kernel_tests" --gtest_filter='AttentionBwd*' > "$OUT/tests-$name.log" 2>&1
      echo "tests ($name): $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/tests-$name.log" | tr '\n' ' ')"
      grep -E "Failure|FAILED  \]|what\(\)" "$OUT/tests-$name.log" | head -10
    done
  fi
  read -ra list <<< "${SHAPES:-B=1,S=16384,H=32,D=128 B=1,S=16384,H=32,D=128,causal B=2,S=16384,H=16,D=64 B=2,S=16384,H=16,D=64,causal}"
  shapes=()
  for s in "${list[@]}"; do shapes+=(--shape "$s"); done
  for b in "${builds[@]}"; do
    name=${b%%:*}
    case $name in *trace) ;; *) continue ;; esac
    for i in "${!list[@]}"; do
      f="$OUT/$name-${list[$i]//[^A-Za-z0-9]/_}"
      echo "== $name ${list[$i]}" | tee -a "$OUT/trace-summary.txt"
      TASP_BWD_TRACE_FILE="$f.bin" timeout 120 build-$name/tools/tasp bench kernel --pass bwd --iters 3 \
        --warmup 1 --heat-ms 300 --shape "${list[$i]}" > "$f.txt" 2>&1
      grep -E "TFLOP|ms" "$f.txt" | tail -2 | tee -a "$OUT/trace-summary.txt"
      wide=; [[ ${list[$i]} == *D=256* ]] && wide=--wide
      python3 tools/gpu/lib/bwd_trace.py $wide "$f.bin" | tee -a "$OUT/trace-summary.txt"
    done
  done
  spec=$(ab_variants)
  [ -n "${AB_ENV:-}" ] && spec+="${spec:+|}$AB_ENV"
  [ -n "$spec" ] && OUT="$OUT" AB_TAG=trace tools/gpu/ab.sh bwd "${ROUNDS:-2}" "$spec" "${shapes[@]}" | tee "$OUT/ab-summary.txt"
  ;;
*) sed -n '2,17p' "$0"; exit 2 ;;
esac
tar -czf "$RES/trace.tar.gz" -C "$OUT" .
