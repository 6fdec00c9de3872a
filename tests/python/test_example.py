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


def test_documents_keep_attention_and_positions_inside_each():
    """--docs: the cuts are drawn per step, the same in both modes; each token's position restarts at its document;
    the one-device attention document by document equals SDPA with the block-diagonal causal mask."""
    import torch
    import torch.nn.functional as F
    g = torch.Generator().manual_seed(3)
    cu, pos = ex.documents(64, 4, g)
    assert cu[0] == 0 and cu[-1] == 64 and len(cu) == 5 and all(b > a for a, b in zip(cu, cu[1:]))
    assert pos.tolist() == [t - max(c for c in cu if c <= t) for t in range(64)]
    q, k, v = torch.randn(1, 64, 4, 16), torch.randn(1, 64, 2, 16), torch.randn(1, 64, 2, 16)
    doc = torch.tensor([sum(c <= t for c in cu[1:]) for t in range(64)])
    mask = (doc[:, None] == doc[None, :]) & torch.ones(64, 64, dtype=torch.bool).tril()
    ref = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask,
                                         enable_gqa=True).transpose(1, 2)
    assert torch.allclose(ex.sdpa_attend(q, k, v, cu), ref, atol=1e-5)
    assert ex.main(TINY + ["--docs", "4"]) == 0
