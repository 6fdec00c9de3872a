"""Bad input gets a ValueError naming the argument, before anything runs."""
import pytest
import torch

import tasp
from tasp.torch import attention_ranks

q = torch.randn(1, 16, 4, 8, dtype=torch.float64)
kv = torch.randn(1, 16, 2, 8, dtype=torch.float64)


@pytest.mark.parametrize("call,names", [
    (lambda: attention_ranks(q[0], kv, kv, 2, "ring"), "q:"),
    (lambda: attention_ranks(q, kv, kv.float(), 2, "ring"), "k, v:"),
    (lambda: attention_ranks(q, torch.randn(1, 16, 3, 8, dtype=torch.float64), torch.randn(1, 16, 3, 8,
                             dtype=torch.float64), 2, "ring"), "k:"),
    (lambda: attention_ranks(q, kv, kv[:, :8], 2, "ring"), "v:"),
    (lambda: attention_ranks(q.half(), kv.half(), kv.half(), 2, "ring"), "q:"),
    (lambda: attention_ranks(q, kv, kv, 0, "ring"), "n:"),
    (lambda: attention_ranks(q, kv, kv, 2, "spiral"), "scheme"),
    (lambda: attention_ranks(q, kv, kv, 2, "ring", causal=1), "causal:"),
    (lambda: attention_ranks(q, kv, kv, 2, "ring", window=(3,)), "window:"),
    (lambda: attention_ranks(q, kv, kv, 2, "ring", causal=True, window=(3, 2)), "window:"),
    (lambda: attention_ranks(q, kv, kv, 2, "ring", cu_seqlens=[0, 9, 15]), "cu_seqlens:"),
    (lambda: attention_ranks(q.expand(2, -1, -1, -1), kv.expand(2, -1, -1, -1), kv.expand(2, -1, -1, -1), 2, "ring",
                             cu_seqlens=[0, 9, 16]), "cu_seqlens:"),
    (lambda: attention_ranks(q, kv, kv, 2, "ring", softmax_scale=-1.0), "softmax_scale:"),
    (lambda: attention_ranks(q, kv, kv, 8, "hamilton", causal=True), "workload: S=16"),
    (lambda: attention_ranks(q, kv, kv, 4, "ring", topology="complete:2"), "n:"),
    (lambda: attention_ranks(q, kv, kv, 4, "usp", ulysses=3), "ulysses"),
    (lambda: tasp.Plan("complete:2", "ring", "B=1,S=16,H=4,D=8", frobnicate=1), "frobnicate"),
    (lambda: tasp.Plan("no-such-file.yaml", "ring", "B=1,S=16,H=4,D=8"), "no-such-file.yaml"),
    (lambda: tasp.Plan("complete:2", "ring", "B=1,S=16,H=4,D=8").tokens(2), "gpu:"),
    (lambda: tasp.Plan("complete:2", "ring", "B=1,S=16,H=4,D=8").shard(q[:, :8], 0), "x:"),
    (lambda: tasp.Plan("complete:2", "ring", "B=1,S=16,H=4,D=8").unshard([q]), "shards:"),
], ids=lambda x: x if isinstance(x, str) else "")
def test_value_errors_name_the_argument(call, names):
    with pytest.raises(ValueError, match=names.replace("(", r"\(")):
        call()

