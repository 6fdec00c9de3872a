"""tasp.torch.Context, attention and compat without GPUs: what they refuse, with a ValueError naming the argument,
before anything runs (their numbers are checked on GPUs: tests/python/gpu/check_attention.py)."""
import pytest
import torch
import torch.distributed as dist

import tasp.torch as tt
from tasp.torch import compat


def test_context_needs_torch_distributed():
    assert not dist.is_initialized()
    with pytest.raises(ValueError, match="group:"):
        tt.Context()


@pytest.fixture
def one_process_group():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.mark.parametrize("kwargs,names", [
    (dict(scheme="spiral"), "scheme:"),
    (dict(scheme="ulysses"), "scheme:"),
    (dict(layout="diagonal"), "layout:"),
    (dict(memory_budget=-1), "memory_budget:"),
    (dict(timeout=0), "timeout:"),
])
def test_context_arguments(one_process_group, kwargs, names):
    with pytest.raises(ValueError, match=names):
        tt.Context(**kwargs)


def test_context_defaults_and_layouts(one_process_group):
    ctx = tt.Context()
    assert (ctx.n, ctx.rank, ctx.topology, ctx.scheme) == (1, 0, "complete:1", "auto")
    x = torch.randn(2, 48, 3)
    assert torch.equal(ctx.unshard(ctx.shard(x, 1, causal=True), 1, causal=True), x)


q = torch.randn(1, 64, 4, 64, dtype=torch.bfloat16)
kv = torch.randn(1, 64, 2, 64, dtype=torch.bfloat16)


@pytest.mark.parametrize("call,names", [
    (lambda: tt.attention(q, kv, kv), "q: expected a tensor on cuda"),
    (lambda: tt.attention(q.float(), kv, kv), "q:"),
    (lambda: compat.ring_flash_attn_func(q, kv, kv, dropout_p=0.1), "dropout_p"),
    (lambda: compat.zigzag_ring_flash_attn_func(q, kv, kv, alibi_slopes=torch.ones(4)), "alibi_slopes"),
    (lambda: compat.zigzag_ring_flash_attn_func(q, kv, kv, deterministic=True), "deterministic"),
    (lambda: compat.ring_flash_attn_func(q, kv, kv, return_attn_probs=True), "return_attn_probs"),
])
def test_attention_refuses(call, names):
    with pytest.raises(ValueError, match=names):
        call()


def test_custom_ops_have_shapes_for_torch_compile():
    """tasp::attention_fwd and attention_bwd are registered with fake kernels (what torch.compile traces through)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from tasp.torch import ops  # noqa: F401 (registers the ops)
    with FakeTensorMode():
        q = torch.empty(2, 64, 8, 128, dtype=torch.bfloat16)
        k = torch.empty(2, 64, 2, 128, dtype=torch.bfloat16)
        out, lse = torch.ops.tasp.attention_fwd(q, k, k, 0)
        assert out.shape == q.shape and out.dtype == q.dtype
        assert lse.shape == (2, 8, 64) and lse.dtype == torch.float32
        dq, dk, dv = torch.ops.tasp.attention_bwd(out, q, k, k, out, lse, 0)
        assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == k.shape
