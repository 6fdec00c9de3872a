#!/usr/bin/env bash
# Configure (sm_90a) and build targets into build-gpu/ on a GPU machine; the log goes to $OUT/build.log.
# Usage: tools/gpu/lib/build.sh TARGET...
#   BUILD_DIR=dir (default build-gpu) and CUDA_FLAGS=... (e.g. -lineinfo for Nsight Compute) in the environment.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/tasp-out}
mkdir -p "$OUT"
B=${BUILD_DIR:-build-gpu}
extra=()
[ -n "${CUDA_FLAGS:-}" ] && extra+=(-DCMAKE_CUDA_FLAGS="$CUDA_FLAGS")
[ -d gpu-deps/include ] && extra+=(-DCMAKE_INCLUDE_PATH="$PWD/gpu-deps/include")  # header-only deps the image lacks
# MPI (one process per GPU): point CMake's FindMPI at the compiler wrapper where there is one.
command -v mpicxx > /dev/null && extra+=(-DMPI_CXX_COMPILER="$(command -v mpicxx)")
t0=$(date +%s)
if ! { cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "${extra[@]}" &&
       cmake --build "$B" --target "$@" -j "$(nproc)"; } > "$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"
  exit 1
fi
echo "build: $(( $(date +%s) - t0 )) s"
