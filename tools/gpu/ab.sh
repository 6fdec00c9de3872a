#!/usr/bin/env bash
# A/B of kernel variants on one GPU: `tasp bench kernel` on the same shapes with the default environment and with
# each variant's variables, taking turns for ROUNDS rounds in one run (the order cancels the GPU's warm-up drift),
# then one table per shape with every run's TFLOP/s and each variant's median ratio to the default.
# Usage: tools/gpu/ab.sh PASS ROUNDS 'VAR=a|VAR=b OTHER=c|BIN=build-base/tools/tasp' --shape ... [more bench args]
#   PASS: fwd, bwd or fwd+bwd. A variant's BIN=path runs another build, its --words are bench options (e.g.
#   --deterministic). BASE_PATCH=file (git diff BASE -- kernels/ > file): the change's base is built too
#   (lib/build-base.sh) and taken as one more variant, BIN=build-base/tools/tasp.
#   Every kernel is heated $HEAT_MS (2000) ms before it is timed
#   (the power limiter settles over about a second: lib/sdpa_bench.py).
#   Raw tables go to $OUT/ab-<tag>.txt ($AB_TAG or "ab"). CLOCKS=1: each run under clocks.sh (the SM clock and
#   board power it settled to, in $OUT/ab-<tag>-clocks.txt): a variant faster for less power per flop shows a higher clock.
#   TESTS='GTEST_FILTER': the kernel tests matching it first ($OUT/tests.log), so that a change is checked in the call
#   that times it; MEMCHECK='GTEST_FILTER': those under compute-sanitizer memcheck too ($OUT/memcheck.log).
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
pass=$1 rounds=$2 spec=$3
shift 3
if [ -n "${TESTS:-}${MEMCHECK:-}" ]; then
  build tasp tasp_kernel_tests
  if [ -n "${TESTS:-}" ]; then
    timeout 400 build-gpu/tests/tasp_kernel_tests --gtest_filter="$TESTS" > "$OUT/tests.log" 2>&1
    echo "tests ($TESTS): $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/tests.log" | tr '\n' ' ')"
    grep -E "Failure|FAILED  \]|what\(\)" "$OUT/tests.log" | head -10
  fi
  if [ -n "${MEMCHECK:-}" ]; then
    timeout 300 compute-sanitizer --tool memcheck build-gpu/tests/tasp_kernel_tests --gtest_filter="$MEMCHECK" > "$OUT/memcheck.log" 2>&1
    echo "memcheck ($MEMCHECK): $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | head -1) $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/memcheck.log" | tr '\n' ' ')"
  fi
fi
[ -x "$T" ] || build tasp
spec=$(base_variant "$spec") || exit 1  # '' alone: the base against the default
tag=${AB_TAG:-ab}
raw="$OUT/ab-$tag.txt"
IFS='|' read -ra variants <<< "$spec"
: > "$raw"
for ((r = 1; r <= rounds; ++r)); do
  round_order "$r" "" "${variants[@]}"
  for v in "${order[@]}"; do
    name=${v:-default}
    bin=$T envs=() args=()
    for w in $v; do case $w in BIN=*) bin=${w#BIN=} ;; --*) args+=("$w") ;; *) envs+=("$w") ;; esac; done
    probe=()
    [ "${CLOCKS:-0}" = 1 ] && probe=(tools/gpu/clocks.sh "$tag-$r-${name//[^A-Za-z0-9_]/_}")
    CLOCK_LOG="$OUT/ab-$tag-clocks.txt" env "${envs[@]}" timeout 300 "${probe[@]}" $bin bench kernel --pass "$pass" --heat-ms "${HEAT_MS:-2000}" --json "$OUT/ab-$tag-$r-${name//[^A-Za-z0-9_]/_}.json" "${args[@]}" "$@" > /dev/null 2>&1 ||
      echo "[$name] round $r failed" >> "$raw"
    python3 - "$OUT/ab-$tag-$r-${name//[^A-Za-z0-9_]/_}.json" "$name" >> "$raw" <<'EOF'
import json, sys
try:
    rows = json.load(open(sys.argv[1]))
except Exception:
    sys.exit(0)
rows = rows.get("results", rows) if isinstance(rows, dict) else rows
for x in rows:
    shape = f"B={x['B']} H={x['H']} Hkv={x['Hkv']} S={x['S']} D={x['D']} {x['mask']}"
    print(f"{sys.argv[2]}\t{shape}\t{x['pass']}\t{x['tflops']:.1f}")
EOF
  done
done
python3 tools/gpu/lib/ab_table.py "$raw"
