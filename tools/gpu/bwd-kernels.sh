#!/usr/bin/env bash
# On one Hopper GPU (the device tool): build, the kernel tests (forward and backward), memcheck of the small
# backward cases, tasp's kernels forward and backward beside PyTorch SDPA (cuDNN, FA2) on the same shapes
# in the same run, what the deterministic dQ costs, and the cuda backend's fwd+bwd through a one-GPU plan. Logs go
# to $OUT.
# Usage: tools/gpu/bwd-kernels.sh [extra --shape args for both benches...]
#   AB="VAR=value ..." in the environment: also the backward tests with those variables set, and the backward
#   bench of the variant taking turns with the default (tools/gpu/ab.sh, two rounds). Several variants:
#   separated by '|' (AB="V=1|V=2").
#   QUICK=1: no memcheck, no PyTorch, no cuda-backend runs (A/B of kernel variants only).
#   BASE_PATCH=file: see below.
set -uo pipefail
source "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$OUT/device.txt"
# BASE_PATCH=file (git diff BASE -- kernels/ > file): the base built beside (tools/gpu/build-base.sh), for
# AB="BIN=build-base/tools/tasp".
[ -n "${BASE_PATCH:-}" ] && { OUT="$OUT/base" tools/gpu/build-base.sh "$BASE_PATCH" > "$OUT/build-base.txt" 2>&1 & }
tools/gpu/build.sh tasp tasp_kernel_tests || exit 1
wait
[ -n "${BASE_PATCH:-}" ] && echo "build base: $(tail -1 "$OUT/build-base.txt")"
grep -A2 "Compiling entry.*bwd" "$OUT/build.log" | grep -E "registers|spill" | head -4
T=build-gpu/tools/tasp
timeout 300 build-gpu/tests/tasp_kernel_tests > "$OUT/tests.log" 2>&1
echo "tests: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/tests.log" | tr '\n' ' ')"
grep -E "Failure|error|FAILED  \]|what\(\)|Expected|Which|relative" "$OUT/tests.log" | head -30
[ "${QUICK:-0}" = 1 ] || timeout 300 compute-sanitizer --tool memcheck build-gpu/tests/tasp_kernel_tests \
  --gtest_filter='AttentionBwdGpu.OneToken*:AttentionBwdGpu.OneWorkspace*:AttentionBwdGpu.CausalWith*:AttentionBwdGpu.PiecesAnd*:AttentionBwdGpu.DeterministicMatches*' > "$OUT/memcheck.log" 2>&1
grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | head -5
shapes=(--shape B=1,S=16384,H=32,D=128 --shape B=1,S=16384,H=32,D=128,causal --shape B=2,S=16384,H=16,D=64
        --shape B=2,S=16384,H=16,D=64,causal "$@")
[ "${QUICK:-0}" = 1 ] && timeout 300 $T bench kernel --pass fwd+bwd "${shapes[@]}" 2>&1 | tee "$OUT/bench-tasp.txt"
if [ -n "${AB:-}" ]; then
  IFS='|' read -ra variants <<< "$AB"
  for ab in "${variants[@]}"; do
    env $ab timeout 300 build-gpu/tests/tasp_kernel_tests --gtest_filter='AttentionBwd*' > "$OUT/tests-ab.log" 2>&1
    echo "tests [$ab]: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/tests-ab.log" | tr '\n' ' ')"
  done
  OUT="$OUT" AB_TAG=bwd tools/gpu/ab.sh bwd 2 "$AB" "${shapes[@]}" | tee "$OUT/bench-ab.txt"
fi
[ "${QUICK:-0}" = 1 ] && exit 0
# tasp and SDPA shape by shape (sdpa_bench.py --tasp), ROUNDS times over the list: the same GPU warmth for both.
timeout 600 python3 tools/gpu/sdpa_bench.py --rounds "${ROUNDS:-2}" --tasp "$T bench kernel" --tasp-json "$OUT/tasp.json" \
  --json "$OUT/sdpa.json" "${shapes[@]}" 2>&1 | tee "$OUT/bench-sdpa.txt"
python3 tools/gpu/compare_kernels.py "$OUT/tasp.json" "$OUT/sdpa.json" --md "$OUT/compare.md"
# What the deterministic dQ costs: the backward with and without --deterministic, taking turns, two rounds.
for r in 1 2; do
  for v in default deterministic; do
    flag=(); [ $v = deterministic ] && flag=(--deterministic)
    timeout 300 $T bench kernel --pass bwd --heat-ms 2000 "${flag[@]}" --json "$OUT/det-$v-$r.json" "${shapes[@]}" > /dev/null 2>&1
  done
done
python3 - "$OUT" <<'PY' | tee "$OUT/deterministic.md"
import json, sys, statistics as st
out = sys.argv[1]
rows = {}
for v in ("default", "deterministic"):
    for r in (1, 2):
        for x in json.load(open(f"{out}/det-{v}-{r}.json")):
            rows.setdefault((x["B"], x["H"], x["S"], x["D"], x["mask"]), {}).setdefault(v, []).append(x["tflops"])
print("| shape | default TFLOP/s | deterministic | cost |\n|---|---:|---:|---:|")
for k, v in rows.items():
    a, b = st.median(v["default"]), st.median(v["deterministic"])
    print(f"| B={k[0]} H={k[1]} S={k[2]} D={k[3]} {k[4]} | {a:.1f} | {b:.1f} | {100 * (a / b - 1):+.1f}% |")
PY
for m in "" ",causal"; do
  timeout 120 $T run --backend cuda -t complete:1 -s ring -w "B=2,S=1000,H=4,Hkv=2,D=128$m" --pass fwd+bwd --check \
    --iters 3 --warmup 1 2>&1 | tail -7
done
timeout 120 $T run --backend cuda -t complete:1 -s ring -w "B=1,S=16384,H=32,D=128,causal" --pass fwd+bwd --check \
  --iters 3 --warmup 1 2>&1 | tail -8
timeout 120 $T run --backend cuda -t complete:1 -s ring -w "B=2,S=3000,H=8,Hkv=2,D=64,causal" --pass fwd+bwd --check \
  --deterministic --iters 3 --warmup 1 2>&1 | tail -7
tar -czf "$OUT/logs.tar.gz" -C "$OUT" --exclude logs.tar.gz . 2>/dev/null
