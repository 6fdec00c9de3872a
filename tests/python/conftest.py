# The package from this checkout (python/) and its C library from the build (tasp._lib finds build*/bindings).
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
