"""The PyTorch baselines tasp is measured against (tasp.torch.baselines: ring / zigzag ring, Ulysses, all-gather),
checked as algorithms on the CPU: their exchanges over a gloo process group of 2 and 4 ranks, each block's attention
written out ("math"), out and dQ, dK, dV gathered from the ranks against tests/python/reference.py's attention over
the whole sequence, full and causal, GQA. A ratio against a baseline is only as good as the baseline."""
import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from reference import attention


def _port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, n, port, result):
    try:
        _check(rank, n, port, result)
    except Exception as e:  # reported, so that the test fails at once instead of waiting out the queue
        result.put({"error": f"rank {rank}: {e!r}"[:500]})


def _check(rank, n, port, result):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=n)
    from tasp.torch import baselines as bl
    g = torch.Generator().manual_seed(3)
    B, S, H, Hkv, D = 2, 16 * n, 4, 2, 8
    full = [torch.randn(B, h, S, D, generator=g, dtype=torch.float64) for h in (H, Hkv, Hkv, H)]  # [B, heads, S, D]
    errs = {}
    for algo in bl.ALGOS:
        for causal in (False, True):
            _, fwd_bwd = bl.baseline(algo, "math", full, causal, rank, n)
            o, grads = fwd_bwd()
            got = []
            for x in (o,) + tuple(grads):
                parts = [torch.empty_like(x) for _ in range(n)]
                dist.all_gather(parts, x.contiguous())
                got.append(bl.unshard(parts, n, causal and algo != "ulysses"))
            if rank == 0:
                q, k, v, do = (x.transpose(1, 2).detach().requires_grad_() for x in full)
                ref = attention(q, k, v, causal=causal)
                ref.backward(do.detach())
                for name, x, r in zip(("out", "dq", "dk", "dv"), got, (ref, q.grad, k.grad, v.grad)):
                    r = r.transpose(1, 2)
                    errs[f"{algo} {'causal' if causal else 'full'} {name}"] = ((x.double() - r).norm() / r.norm()).item()
    if rank == 0:
        result.put(errs)
    dist.destroy_process_group()


def _spawn(target, n, answers):
    """Runs target(rank, n, port, queue) on n processes of a gloo group; the `answers` dicts they put, in order."""
    ctx = mp.get_context("spawn")
    result = ctx.Queue()
    port = _port()
    procs = [ctx.Process(target=target, args=(r, n, port, result)) for r in range(n)]
    for p in procs:
        p.start()
    got = [result.get(timeout=120) for _ in range(answers)]
    for p in procs:
        p.join(timeout=10)
        if p.is_alive():
            p.kill()
    errors = [g["error"] for g in got if "error" in g]
    assert not errors, errors
    return got


@pytest.mark.parametrize("n", [2, 4])
def test_baselines_match_attention(n):
    errs = _spawn(_worker, n, 1)[0]
    assert len(errs) == 3 * 2 * 4
    bad = {k: v for k, v in errs.items() if not v < 1e-5}  # fp32 running sums in the baselines
    assert not bad, bad


def _layout_worker(rank, n, port, result):
    try:
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
        dist.init_process_group("gloo", rank=rank, world_size=n)
        import tasp.torch as tt
        seen = []
        for layout in (None, "contiguous", "zigzag"):
            ctx = tt.Context(layout=layout)
            for causal, cu in ((False, None), (True, None), (True, [0, 50, 51, 90, 64 * n])):
                x = torch.arange(2 * 64 * n * 3, dtype=torch.float64).view(2, 64 * n, 3)
                mine = ctx.shard(x, 1, causal=causal, cu_seqlens=cu)
                assert torch.equal(ctx.unshard(mine, 1, causal=causal, cu_seqlens=cu), x)
                seen.append(mine[0, :, 0].long().div(3, rounding_mode="floor").tolist())  # this rank's token ids
        result.put({"rank": rank, "tokens": seen})
        dist.destroy_process_group()
    except Exception as e:
        result.put({"rank": rank, "error": repr(e)[:500]})


@pytest.mark.parametrize("n", [3])  # one group size: the layouts themselves are checked for 2..8 ranks in test_plan.py
def test_context_layouts_over_a_process_group(n):
    """Context.shard and unshard over a real process group (gloo): every rank's shard gathers back into the whole
    tensor, and the ranks' shards are disjoint and cover every token, for each layout and mask."""
    got = _spawn(_layout_worker, n, n)
    by_rank = {g["rank"]: g["tokens"] for g in got}
    for case in range(len(by_rank[0])):
        tokens = sorted(t for r in range(n) for t in by_rank[r][case])
        assert tokens == list(range(64 * n)), case
