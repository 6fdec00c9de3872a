"""tasp's attention as PyTorch custom ops (torch.library), so that torch.compile keeps it as one opaque node with
known output shapes instead of breaking the graph: tasp::attention_fwd (q, k, v -> out, lse, saved) and
tasp::attention_bwd (dO, q, k, v, out, lse, saved -> dq, dk, dv), joined by autograd; `scale` is the scores' scale
(0: 1/sqrt(D)), the backward's its forward's. `saved` holds what the plan
keeps between the passes (tasp_rank_saved_bytes: the K/V an allgather plan gathered), one per layer call as autograd
keeps the layer's other tensors; empty when the plan keeps nothing or no backward follows. A plan's rank is named by
an integer (`register`), since ops take tensors and numbers only; the registry holds ranks weakly (their Context
decides how long they live) and a forward's autograd record holds its rank until its backward has run. The work
goes onto PyTorch's current stream (bindings/tasp.h)."""
import itertools
import weakref

import torch

from tasp._lib import check, lib

_RANKS = {}  # register(rank) -> its key; weak references: a rank lives as long as its Context or a pending backward
_KEYS = itertools.count()


def register(rank):
    """The integer the ops take for `rank` (a tasp.torch.context._Rank)."""
    key = next(_KEYS)
    _RANKS[key] = weakref.ref(rank, lambda _, k=key: _RANKS.pop(k, None))
    return key


def rank_of(key):
    """The rank registered as `key`; RuntimeError once it was released."""
    ref = _RANKS.get(key)
    rank = ref() if ref is not None else None
    if rank is None:
        raise RuntimeError(f"tasp: plan rank {key} was released (its Context dropped it and no backward holds it)")
    return rank


def _stream(t):
    return torch.cuda.current_stream(t.device).cuda_stream


def _ptr(t):
    return t.data_ptr() if t.numel() else None


@torch.library.custom_op("tasp::attention_fwd", mutates_args=())
def attention_fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rank: int, saved_bytes: int,
                  scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    B, S, H, _ = q.shape
    out = torch.empty_like(q)
    lse = torch.empty(B, H, S, dtype=torch.float32, device=q.device)
    saved = torch.empty(saved_bytes, dtype=torch.uint8, device=q.device)
    check(lib.tasp_rank_forward(rank_of(rank).handle, q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
                                lse.data_ptr(), _ptr(saved), scale, _stream(q)), "attention")
    return out, lse, saved


@attention_fwd.register_fake
def _(q, k, v, rank, saved_bytes, scale):
    B, S, H, _ = q.shape
    return torch.empty_like(q), q.new_empty(B, H, S, dtype=torch.float32), q.new_empty(saved_bytes, dtype=torch.uint8)


@torch.library.custom_op("tasp::attention_bwd", mutates_args=())
def attention_bwd(dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                  lse: torch.Tensor, saved: torch.Tensor, rank: int,
                  scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    check(lib.tasp_rank_backward(rank_of(rank).handle, q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
                                 lse.data_ptr(), _ptr(saved), dout.contiguous().data_ptr(), dq.data_ptr(), dk.data_ptr(),
                                 dv.data_ptr(), scale, _stream(q)), "attention backward")
    return dq, dk, dv


@attention_bwd.register_fake
def _(dout, q, k, v, out, lse, saved, rank, scale):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _setup(ctx, inputs, output):
    q, k, v, rank, _, scale = inputs
    out, lse, saved = output
    ctx.save_for_backward(q, k, v, out, lse, saved)
    ctx.rank, ctx.scale = rank, scale
    ctx.keep = _RANKS[rank]() if rank in _RANKS else None  # the rank (its buffers) until this backward has run


def _backward(ctx, dout, dlse, dsaved):
    q, k, v, out, lse, saved = ctx.saved_tensors
    dq, dk, dv = attention_bwd(dout, q, k, v, out, lse, saved, ctx.rank, ctx.scale)
    return dq, dk, dv, None, None, None


attention_fwd.register_autograd(_backward, setup_context=_setup)
