# Sourced by the GPU scripts first: the repository root as working directory, $OUT (their logs; the device
# tool sets it), and NCCL without NVLink multicast (KINDS.md: leave NVLS off on the lent machines).
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT=${OUT:-/tmp/tasp-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
