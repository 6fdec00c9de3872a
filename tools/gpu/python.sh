#!/usr/bin/env bash
# Does tasp work from PyTorch on these GPUs? Builds the C library (build-gpu/), then under torchrun on every GPU:
# tests/python/gpu/check_attention.py (tasp.torch.attention and the ring-flash-attention compat functions against
# one-GPU SDPA, forward and backward) and `pip install --no-build-isolation --no-deps .` into a scratch prefix (the
# package as users install it). Logs in $OUT.
# Usage: tools/gpu/python.sh
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
[ "$N" -ge 2 ] || { echo "python.sh needs 2 or more GPUs"; exit 2; }
device_info
build tasp_c
export TASP_LIBRARY=$PWD/build-gpu/bindings/libtasp_c.so PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
timeout 600 torchrun --nproc_per_node="$N" tests/python/gpu/check_attention.py 2>&1 | tee "$OUT/check_attention.log"
rc=${PIPESTATUS[0]}
echo "check_attention: rc $rc, $(grep -c '^PASS' "$OUT/check_attention.log") PASS, $(grep -c '^FAIL' "$OUT/check_attention.log") FAIL"
exit "$rc"
