#!/usr/bin/env bash
# .venv with this checkout's Python package on its path (a .pth file: `import tasp` finds python/tasp, which loads
# build/bindings/libtasp_c.so, so nothing is built twice; `pip install .` makes a wheel instead), and unless
# --package-only the Python layer's test dependencies (idempotent): PyTorch and pytest. tests/python runs tasp's cpu
# backend, so PyTorch's CPU build is enough (0.2 GB from download.pytorch.org); where only PyPI is reachable (CI) its
# default build comes instead (5.2 GB installed with its CUDA libraries; 1 min 50 s to fetch and install here, 2026-11-25).
# The venv sees the system's packages, so a machine that already has PyTorch (the GPU image) downloads nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv --system-site-packages .venv
site=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
echo "$PWD/python" > "$site/tasp-checkout.pth"
[ "${1:-}" = --package-only ] && exit 0
if ! .venv/bin/python -c "import torch, pytest, numpy" 2>/dev/null; then
  .venv/bin/python -m pip install -q --disable-pip-version-check --retries 0 --timeout 20 \
    --index-url https://download.pytorch.org/whl/cpu torch 2>/dev/null ||
    .venv/bin/python -m pip install -q --disable-pip-version-check torch
  .venv/bin/python -m pip install -q --disable-pip-version-check pytest numpy
fi
.venv/bin/python -c "import torch, pytest; print(f'python: torch {torch.__version__}, pytest {pytest.__version__} in .venv')"
