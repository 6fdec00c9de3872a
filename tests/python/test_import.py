"""The package's imports in either order: `import tasp` first, then torch, must not leave PyTorch with an NCCL it
cannot use (tasp/_lib.py loads PyTorch before the C library where PyTorch is installed)."""
import subprocess
import sys


def test_tasp_imports_before_torch():
    r = subprocess.run([sys.executable, "-c", "import tasp; import torch; print(torch.__version__)"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-500:]
