"""tasp from PyTorch. `attention` (with a `Context` per process group) is the training path: this rank's shard on
its GPU through tasp's kernels and NCCL schedule, autograd through tasp's backward (tasp/torch/context.py);
`tasp.torch.compat` has ring-flash-attention's entry points over it. `attention_ranks` runs a plan's n ranks in this process on the CPU (tasp's exact backend, ranks
as threads), full tensors in and out, differentiable: every scheme's plumbing checked by torch.autograd.gradcheck
without GPUs. Tensors are in flash-attn's layout: q [B, S, H, D], k and v [B, S, Hkv, D] (GQA/MQA: Hkv divides H)."""
import ctypes
import math

import torch

import tasp
from tasp._lib import check, lib

__all__ = ["Context", "attention", "attention_ranks", "workload_text"]

_DOUBLE_P = ctypes.POINTER(ctypes.c_double)


def _ptr(t):
    return ctypes.cast(t.data_ptr(), _DOUBLE_P) if t is not None else None


def _check_qkv(q, k, v, devices=("cpu",), dtypes=(torch.float32, torch.float64)):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"{name}: expected 4 dimensions [B, S, heads, D], got shape {tuple(t.shape)}")
        if t.device.type not in devices:
            raise ValueError(f"{name}: expected a tensor on {' or '.join(devices)}, got {t.device}")
        if t.dtype not in dtypes:
            raise ValueError(f"{name}: expected dtype {' or '.join(str(d) for d in dtypes)}, got {t.dtype}")
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"k, v: expected q's dtype {q.dtype}, got {k.dtype} and {v.dtype}")
    B, S, H, D = q.shape
    if k.shape != v.shape:
        raise ValueError(f"v: expected k's shape {tuple(k.shape)}, got {tuple(v.shape)}")
    if k.shape[0] != B or k.shape[1] != S or k.shape[3] != D:
        raise ValueError(f"k: expected [B={B}, S={S}, Hkv, D={D}] as q, got {tuple(k.shape)}")
    if k.shape[2] < 1 or H % k.shape[2]:
        raise ValueError(f"k: its {k.shape[2]} heads do not divide q's {H} (GQA needs H % Hkv == 0)")


def workload_text(q, k, causal=False, window=None, cu_seqlens=None):
    """The workload tasp plans for (its -w text) from q, k and the mask arguments; ValueError naming the argument."""
    B, S, H, D = q.shape
    text = f"B={B},S={S},H={H},Hkv={k.shape[2]},D={D}"
    if not isinstance(causal, bool):
        raise ValueError(f"causal: expected True or False, got {causal!r}")
    if causal:
        text += ",causal"
    if window is not None:
        if (not isinstance(window, (tuple, list)) or len(window) != 2 or
                not all(isinstance(x, int) and x >= -1 for x in window)):
            raise ValueError(f"window: expected (left, right), each a count of keys or -1 (unbounded), got {window!r}")
        left, right = window
        if causal and right > 0:
            raise ValueError(f"window: a causal query sees no key after it, so right must be 0 or -1, got {right}")
        if left != -1 or right not in (-1, 0 if causal else -1):
            text += f",window={left}:{0 if causal and right == -1 else right}"
    if cu_seqlens is not None:
        seq = [int(x) for x in (cu_seqlens.tolist() if isinstance(cu_seqlens, torch.Tensor) else cu_seqlens)]
        if B != 1:
            raise ValueError(f"cu_seqlens: packed documents need one sequence (B=1), q has B={B}")
        if len(seq) < 2 or seq[0] != 0 or seq[-1] != S or any(b <= a for a, b in zip(seq, seq[1:])):
            raise ValueError(f"cu_seqlens: expected increasing offsets from 0 to S={S}, got {seq}")
        if len(seq) > 2:
            text += ",docs=" + "+".join(str(b - a) for a, b in zip(seq, seq[1:]))
    return text


class _Ranks(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, plan, bits):
        ctx.plan, ctx.bits = plan, bits
        ctx.save_for_backward(q, k, v)
        out, _ = _run(plan, bits, q, k, v, None)
        return out.to(q.dtype)

    @staticmethod
    def backward(ctx, dout):
        q, k, v = ctx.saved_tensors
        _, grads = _run(ctx.plan, ctx.bits, q, k, v, dout)
        return tuple(g.to(q.dtype) for g in grads) + (None, None)


def _run(plan, bits, q, k, v, dout):
    """The whole problem through the plan on the cpu backend: out (and dq, dk, dv with dout)."""
    q, k, v = (x.detach().to(torch.float64).contiguous() for x in (q, k, v))
    B, S, H, D = q.shape
    out = torch.empty_like(q)
    lse = torch.empty(B, S, H, dtype=torch.float64)
    grads = None
    if dout is not None:
        dout = dout.detach().to(torch.float64).contiguous()
        grads = (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v))
    g = grads or (None, None, None)
    check(lib.tasp_cpu_run(plan._handle, bits, _ptr(q), _ptr(k), _ptr(v), _ptr(dout), _ptr(out), _ptr(lse), *map(_ptr, g)),
          "attention_ranks")
    return out, grads


def attention_ranks(q, k, v, n, scheme, causal=False, window=None, cu_seqlens=None, softmax_scale=None, topology=None,
                    **options):
    """Attention over the whole sequence through `scheme`'s plan for n ranks (topology complete:n), the n ranks run
    in this process by tasp's cpu backend (float64 or float32 arithmetic as the tensors are). q [B, S, H, D], k and v
    [B, S, Hkv, D] on the CPU; window (left, right) as flash-attn's window_size (-1: unbounded); cu_seqlens the packed
    documents' offsets [0, ..., S] of a B=1 sequence; softmax_scale default 1/sqrt(D). `topology` (default
    complete:n) and `options` (ulysses, inner, head_groups, layout, ...) as tasp.Plan takes them. Returns the output
    [B, S, H, D]; differentiable in q, k and v."""
    _check_qkv(q, k, v)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n: expected a positive number of ranks, got {n!r}")
    if not isinstance(scheme, str):
        raise ValueError(f"scheme: expected a scheme's name, got {scheme!r}")
    text = workload_text(q, k, causal, window, cu_seqlens)
    try:
        plan = tasp.Plan(topology or f"complete:{n}", scheme, text, **options)
    except ValueError as e:
        raise ValueError(f"n={n}, scheme={scheme!r}: {e}") from None
    if plan.info["gpus"] != n:
        raise ValueError(f"n: the topology has {plan.info['gpus']} GPUs, n is {n}")
    D = q.shape[3]
    if softmax_scale is not None:
        if not isinstance(softmax_scale, (int, float)) or not softmax_scale > 0:
            raise ValueError(f"softmax_scale: expected a positive number, got {softmax_scale!r}")
        # tasp scales scores by 1/sqrt(D): another scale is q scaled by the ratio (and dq with it, by autograd).
        q = q * (softmax_scale * math.sqrt(D))
    bits = 64 if q.dtype == torch.float64 else 32
    return _Ranks.apply(q, k, v, plan, bits)


from tasp.torch.context import Context, attention  # noqa: E402 (uses workload_text and _check_qkv above)
