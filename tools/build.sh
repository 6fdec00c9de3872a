#!/usr/bin/env bash
# Configure and build into build/ (CUDA parts too when nvcc is found).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${CUDACXX:-}" ] && ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release ${TASP_CMAKE_ARGS:-} >/dev/null
cmake --build build -j "$(nproc)"
