"""The C ABI (bindings/tasp.h) through ctypes: no compile against Python or PyTorch, so one build serves every
interpreter and framework version. The library is found at $TASP_LIBRARY, beside this package (pip install), or in
the repository's build/ (a source checkout after tools/build.sh)."""
import ctypes
import os
from pathlib import Path

_NAME = "libtasp_c.so"
API_VERSION = 5  # bindings/tasp.h's TASP_API_VERSION


def _candidates():
    if os.environ.get("TASP_LIBRARY"):
        yield Path(os.environ["TASP_LIBRARY"])
    here = Path(__file__).resolve().parent
    yield here / _NAME
    for build in ("build", "build-cpu", "build-gpu"):
        yield here.parents[1] / build / "bindings" / _NAME


def _torch_first():
    """PyTorch, where it is installed, loads before the C library: libtasp_c links the libnccl.so.2 it was built
    against, and whichever NCCL a process loads first serves everything after it, so a system NCCL older than
    PyTorch's own made `import tasp; import torch` fail (undefined symbol ncclCommResume: PyTorch 2.15 over NCCL
    2.2x). PyTorch first gives both its NCCL."""
    import importlib.util
    import sys
    if "torch" in sys.modules or importlib.util.find_spec("torch") is None:
        return
    try:
        import torch  # noqa: F401
    except Exception:  # a broken PyTorch (ImportError, OSError from its CUDA libraries): tasp's planner still loads
        pass


def _load():
    _torch_first()
    tried = []
    for path in _candidates():
        tried.append(str(path))
        if path.is_file():
            lib = ctypes.CDLL(str(path))
            break
    else:
        raise ImportError("tasp: the C library was not found (set TASP_LIBRARY, or build with tools/build.sh); tried "
                          + ", ".join(tried))
    c_double_p = ctypes.POINTER(ctypes.c_double)
    lib.tasp_api_version.restype = ctypes.c_int
    lib.tasp_last_error.restype = ctypes.c_char_p
    lib.tasp_plan_create.argtypes = [ctypes.c_char_p] * 4 + [ctypes.POINTER(ctypes.c_void_p)]
    lib.tasp_plan_create.restype = ctypes.c_int
    lib.tasp_plan_destroy.argtypes = [ctypes.c_void_p]
    lib.tasp_plan_json.argtypes = [ctypes.c_void_p]
    lib.tasp_plan_json.restype = ctypes.c_char_p
    lib.tasp_configs_json.restype = ctypes.c_char_p
    lib.tasp_cpu_run.argtypes = [ctypes.c_void_p, ctypes.c_int] + [c_double_p] * 9
    lib.tasp_cpu_run.restype = ctypes.c_int
    vp, c_int = ctypes.c_void_p, ctypes.c_int
    lib.tasp_nccl_id.argtypes = [ctypes.c_char_p]
    lib.tasp_nccl_id.restype = c_int
    lib.tasp_group_create.argtypes = [c_int, c_int, c_int, ctypes.c_char_p, ctypes.POINTER(vp)]
    lib.tasp_group_create.restype = c_int
    lib.tasp_group_destroy.argtypes = [vp]
    lib.tasp_group_watch.argtypes = [vp, c_int]
    lib.tasp_group_watch.restype = c_int
    lib.tasp_group_measure_fabric.argtypes = [vp] + [ctypes.c_char_p] * 3 + [ctypes.POINTER(ctypes.c_char_p)]
    lib.tasp_group_measure_fabric.restype = c_int
    lib.tasp_rank_create.argtypes = [vp, vp, c_int, ctypes.POINTER(vp)]
    lib.tasp_rank_create.restype = c_int
    lib.tasp_rank_destroy.argtypes = [vp]
    lib.tasp_rank_saved_bytes.argtypes = [vp, ctypes.POINTER(ctypes.c_size_t)]
    lib.tasp_rank_saved_bytes.restype = c_int
    lib.tasp_rank_device_bytes.argtypes = [vp, ctypes.POINTER(ctypes.c_size_t)]
    lib.tasp_rank_device_bytes.restype = c_int
    lib.tasp_rank_documents.argtypes = [vp, ctypes.POINTER(ctypes.c_longlong), ctypes.c_size_t]
    lib.tasp_rank_documents.restype = c_int
    lib.tasp_rank_forward.argtypes = [vp] * 7 + [ctypes.c_float, vp]
    lib.tasp_rank_forward.restype = c_int
    lib.tasp_rank_backward.argtypes = [vp] * 11 + [ctypes.c_float, vp]
    lib.tasp_rank_backward.restype = c_int
    lib.tasp_rank_wait.argtypes = [vp]
    lib.tasp_rank_wait.restype = c_int
    if lib.tasp_api_version() != API_VERSION:
        raise ImportError(f"tasp: {path} speaks C ABI version {lib.tasp_api_version()}, this package {API_VERSION}")
    return lib


lib = _load()

OK, ERR_INPUT, ERR_RUNTIME = 0, 2, 3
NCCL_ID_BYTES = 128


class TaspError(RuntimeError):
    """Something failed inside tasp while running (CUDA, NCCL, a numeric check)."""


def check(status, what):
    """Raises for a C ABI status: ValueError for bad input (the message names the argument), TaspError else."""
    if status == OK:
        return
    message = lib.tasp_last_error().decode()
    if status == ERR_INPUT:
        raise ValueError(f"{what}: {message}")
    raise TaspError(f"{what}: {message}")
