"""An independent reference: attention written out in float64 torch (scores, mask, softmax), no tasp code."""
import math

import torch


def allowed(S, causal=False, window=None, cu_seqlens=None):
    """[S, S] mask: query i may see key j."""
    i = torch.arange(S).unsqueeze(1)
    j = torch.arange(S).unsqueeze(0)
    ok = torch.ones(S, S, dtype=torch.bool)
    if causal:
        ok &= j <= i
    if window is not None:
        left, right = window
        if left >= 0:
            ok &= j >= i - left
        if right >= 0:
            ok &= j <= i + right
    if cu_seqlens is not None:
        doc = torch.zeros(S, dtype=torch.long)
        for b in list(cu_seqlens)[1:-1]:
            doc[int(b):] += 1
        ok &= doc.unsqueeze(1) == doc.unsqueeze(0)
    return ok


def attention(q, k, v, causal=False, window=None, cu_seqlens=None, softmax_scale=None):
    """q [B, S, H, D], k and v [B, S, Hkv, D] -> [B, S, H, D], in float64; differentiable."""
    q, k, v = (x.to(torch.float64) for x in (q, k, v))
    B, S, H, D = q.shape
    group = H // k.shape[2]
    k = k.repeat_interleave(group, dim=2)
    v = v.repeat_interleave(group, dim=2)
    scale = softmax_scale if softmax_scale is not None else 1 / math.sqrt(D)
    scores = torch.einsum("bihd,bjhd->bhij", q, k) * scale
    scores = scores.masked_fill(~allowed(S, causal, window, cu_seqlens), float("-inf"))
    return torch.einsum("bhij,bjhd->bihd", torch.softmax(scores, dim=-1), v)
