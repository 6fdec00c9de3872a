"""tasp.torch.attention_ranks: every scheme's plan run by the cpu backend, output and gradients against the float64
reference (reference.py) on random inputs, and torch.autograd.gradcheck on the whole plumbing."""
import pytest
import torch

import reference
from tasp.torch import attention_ranks

# (n, scheme, plan options): every scheme, 2 to 8 ranks, odd counts, usp's two levels.
PLANS = [
    (2, "ring", {}), (3, "ring", {}), (4, "zigzag", {}), (3, "zigzag", {}), (2, "allgather", {}), (4, "allgather", {}),
    (8, "allgather", {}), (4, "hamilton", {}), (8, "hamilton", {}), (4, "ulysses", {}), (2, "ulysses", {"head_groups": 2}),
    (4, "usp", {"ulysses": 2}), (8, "two-level", {"topology": "cluster:2x4"}), (3, "allgather", {"gather_pieces": 2}),
]

MASKS = [dict(), dict(causal=True), dict(window=(5, 3)), dict(causal=True, window=(7, 0)),
         dict(causal=True, cu_seqlens="0,11,20,S")]


def random_qkv(B, S, H, Hkv, D, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    make = lambda h: torch.randn(B, S, h, D, generator=g, dtype=dtype).requires_grad_()  # noqa: E731
    return make(H), make(Hkv), make(Hkv)


def grads(out, dout, *xs):
    return torch.autograd.grad(out, xs, dout)


@pytest.mark.parametrize("n,scheme,options", PLANS, ids=lambda p: str(p))
@pytest.mark.parametrize("mask", MASKS, ids=lambda m: ",".join(f"{k}={v}" for k, v in m.items()) or "full")
def test_matches_reference(n, scheme, options, mask):
    S = 112 if n == 8 else 64  # hamilton's 7 rings over 8 GPUs split each zigzag chunk in 7 pieces
    if "cu_seqlens" in mask:
        mask = dict(mask, cu_seqlens=[0, 11, 20, S])
    B = 1 if "cu_seqlens" in mask else 2
    q, k, v = random_qkv(B, S, 8, 2, 16, seed=n)
    if scheme == "zigzag" and not mask.get("causal"):
        with pytest.raises(ValueError, match="causal variant of ring"):
            attention_ranks(q, k, v, n, scheme, **mask, **options)
        return
    out = attention_ranks(q, k, v, n, scheme, **mask, **options)
    want = reference.attention(q, k, v, **mask)
    torch.testing.assert_close(out, want, rtol=0, atol=1e-12)
    dout = torch.randn_like(want)
    for got, ref in zip(grads(out, dout, q, k, v), grads(want, dout, q, k, v)):
        torch.testing.assert_close(got, ref, rtol=0, atol=1e-11)


@pytest.mark.parametrize("scheme,n,options", [("ring", 2, {}), ("zigzag", 2, {}), ("allgather", 3, {}),
                                              ("hamilton", 4, {}), ("ulysses", 2, {}), ("usp", 4, {"ulysses": 2})])
def test_gradcheck(scheme, n, options):
    q, k, v = random_qkv(1, 4 * n, 2, 1, 4, seed=7)
    assert torch.autograd.gradcheck(lambda a, b, c: attention_ranks(a, b, c, n, scheme, causal=True, **options),
                                    (q, k, v), eps=1e-6, atol=1e-8)


def test_float32_and_softmax_scale():
    q, k, v = random_qkv(1, 32, 4, 4, 8, dtype=torch.float32, seed=3)
    out = attention_ranks(q, k, v, 4, "zigzag", causal=True, softmax_scale=0.3)
    assert out.dtype == torch.float32
    want = reference.attention(q, k, v, causal=True, softmax_scale=0.3)
    torch.testing.assert_close(out.double(), want, rtol=0, atol=2e-5)


def test_mqa_auto():
    q, k, v = random_qkv(1, 32, 4, 1, 8, seed=5)
    out = attention_ranks(q, k, v, 4, "auto", causal=True)
    torch.testing.assert_close(out, reference.attention(q, k, v, causal=True), rtol=0, atol=1e-12)
