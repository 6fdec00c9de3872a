#!/usr/bin/env bash
# One device call: kernel tests, memcheck and timings (GPU 0), then the executor checks, calibration and
# measured-vs-predicted runs on every GPU; everything packed into $OUT/results.tar.gz (the device tool
# returns at most 8 files).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/tasp-out}
mkdir -p "$OUT/r"
OUT="$OUT/r" tools/gpu/kernels.sh 2>&1 | tail -25
OUT="$OUT/r" tools/gpu/executor.sh "${1:-10}" 2>&1 | tail -60
tar -czf "$OUT/results.tar.gz" -C "$OUT/r" . && rm -rf "$OUT/r"
