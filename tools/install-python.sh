#!/usr/bin/env bash
# The Python layer's test dependencies in .venv (idempotent): PyTorch and pytest. tests/python runs tasp's cpu
# backend, so PyTorch's CPU build is enough (0.2 GB from download.pytorch.org); where only PyPI is reachable (CI) its
# default build comes instead (5.2 GB installed with its CUDA libraries; 1 min 50 s to fetch and install here, 2026-11-25).
# The venv sees the system's packages, so a machine that already has PyTorch (the GPU image) downloads nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv --system-site-packages .venv
if ! .venv/bin/python -c "import torch, pytest, numpy" 2>/dev/null; then
  .venv/bin/python -m pip install -q --disable-pip-version-check --retries 0 --timeout 20 \
    --index-url https://download.pytorch.org/whl/cpu torch 2>/dev/null ||
    .venv/bin/python -m pip install -q --disable-pip-version-check torch
  .venv/bin/python -m pip install -q --disable-pip-version-check pytest numpy
fi
.venv/bin/python -c "import torch, pytest; print(f'python: torch {torch.__version__}, pytest {pytest.__version__} in .venv')"
