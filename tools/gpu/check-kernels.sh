#!/usr/bin/env bash
# One device call after kernel changes made without a GPU: the forward's and the backward's tests, memcheck and
# hot side-by-side tables (fwd-kernels.sh, then bwd-kernels.sh on the same build), packed into
# $OUT/check.tar.gz (the device tool returns at most 8 files). About 6-7 minutes on one H200.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/tasp-out}
mkdir -p "$OUT/fwd" "$OUT/bwd"
OUT="$OUT/fwd" ROUNDS=${ROUNDS:-1} tools/gpu/fwd-kernels.sh 2>&1 | tail -40
OUT="$OUT/bwd" ROUNDS=${ROUNDS:-1} tools/gpu/bwd-kernels.sh 2>&1 | tail -45
tar -czf "$OUT/check.tar.gz" -C "$OUT" fwd bwd && rm -rf "$OUT/fwd" "$OUT/bwd"
