"""examples/train_tiny_llama.py on the CPU (its one-device SDPA mode, tiny sizes): it trains (the loss starts near
log(vocab) and falls), and --compare tells two runs' losses apart. The tasp mode needs GPUs (tools/gpu/train.sh)."""
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import train_tiny_llama as ex  # noqa: E402

TINY = ["--mode", "sdpa", "--device", "cpu", "--steps", "6", "--seq", "64", "--dim", "64", "--layers", "2",
        "--heads", "4", "--kv-heads", "2", "--vocab", "97", "--lr", "1e-2"]


def test_trains_on_the_cpu(tmp_path):
    log = tmp_path / "a.json"
    assert ex.main(TINY + ["--json", str(log)]) == 0
    loss = json.load(open(log))["loss"]
    assert len(loss) == 6 and all(math.isfinite(x) for x in loss)
    assert abs(loss[0] - math.log(97)) < 1.0
    assert loss[-1] < loss[0]


def test_compare(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert ex.main(TINY + ["--json", str(a)]) == 0
    assert ex.main(TINY + ["--json", str(b)]) == 0
    assert ex.main(["--compare", str(a), str(b)]) == 0  # the same seed: the same losses
    d = json.load(open(b))
    d["loss"] = [x * 1.05 for x in d["loss"]]
    json.dump(d, open(b, "w"))
    assert ex.main(["--compare", str(a), str(b)]) == 1
