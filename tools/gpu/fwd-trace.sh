#!/usr/bin/env bash
# On one Hopper GPU: where the forward kernel's time goes, CTA by CTA. Builds the kernel with its phase clocks
# (-DTASP_FWD_TRACE, tools/gpu/fwd_trace.py reads them) beside the plain build, runs the forward on the short and
# long causal shapes and D=128 full, and prints each task's phases and how the SMs' time splits (start, walk, end,
# gaps, tail) and warpgroup 0's (waiting between tasks, tile 0, walk, end). The short shapes run on the persistent
# grid; TRACE_ENV=TASP_FWD_PERSIST=0 traces them one task a CTA too.
#   VARIANTS="name:-DFLAG name2:-DFLAG2": each flag set built plain and traced, traced, and A/B'd against the plain
#   build (tools/gpu/ab.sh, ROUNDS=2 rounds); e.g. nostore:-DTASP_FWD_NOSTORE (the epilogue's stores left out: the
#   most a faster epilogue could gain).
#   BASE_PATCH=file (git diff BASE -- kernels/ > file): the base built too (tools/gpu/build-base.sh) and A/B'd.
#   TRACE_ENV="VAR=1|VAR=2": environment variants of the plain build traced too (e.g. TASP_FWD_BN=192).
#   TESTS=1: the plain build's forward GPU tests first, on both kernel paths, and memcheck of the small ones.
# Everything goes to $OUT/trace.tar.gz (the device tool returns few files), the summaries also to stdout.
# (The bench's own rates in a trace build include copying the clocks out after every launch: the launch's
# length is the summary's globaltimer span.)
# Usage: tools/gpu/fwd-trace.sh
set -uo pipefail
source "$(dirname "$0")/env.sh"
source tools/gpu/trace-builds.sh
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
      python3 tools/gpu/fwd_trace.py "$f.bin" | tee -a "$OUT/trace-summary.txt"
    done
  done
done
spec=$(ab_variants)
ab_shapes=()
for s in "${shapes[@]}" B=2,S=16384,H=16,D=64,causal B=1,S=12000,H=32,D=128,causal B=1,S=16384,H=32,D=80,causal; do ab_shapes+=(--shape "$s"); done
[ -n "$spec" ] && OUT="$OUT" AB_TAG=trace tools/gpu/ab.sh fwd "${ROUNDS:-2}" "$spec" "${ab_shapes[@]}" | tee "$OUT/ab-summary.txt"
tar -czf "$RES/trace.tar.gz" -C "$OUT" .
