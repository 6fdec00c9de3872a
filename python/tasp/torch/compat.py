"""ring-flash-attention's entry points over tasp (`from tasp.torch.compat import zigzag_ring_flash_attn_func`
in place of `from ring_flash_attn import ...`): the same arguments and shard layouts, run by tasp's plan for the
process group. ring_flash_attn_func takes contiguous shards (rank r holds the r-th n-th of the sequence),
zigzag_ring_flash_attn_func zigzag ones (rank r holds chunks r and 2n-1-r of 2n). Dropout and ALiBi are refused
with a ValueError naming the argument; return_attn_probs=True returns (out, softmax_lse, None) as ring-flash-attention
does (no probabilities); deterministic=True runs tasp's backward with dQ bit-identical from run to run (as flash-attn's
deterministic backward).

llama3_flash_attn_varlen_func takes packed documents ([tokens, heads, D], no batch) split contiguously over the
ranks, with what llama3_flash_attn_prepare_cu_seqlens made from the whole sequence's cu_seqlens: use this module's
prepare function, which also remembers the whole sequence's documents for the call (tasp plans the whole sequence;
the per-rank slices alone do not say where the other ranks' documents end, and asking the other ranks would make
every call wait on the host)."""
import weakref

import torch

from tasp.torch.context import Context, attention

__all__ = ["ring_flash_attn_func", "zigzag_ring_flash_attn_func", "llama3_flash_attn_prepare_cu_seqlens",
           "llama3_flash_attn_varlen_func"]

_CONTEXTS = {}


def _context(group, layout, deterministic):
    key = (id(group) if group is not None else None, layout, bool(deterministic))
    if key not in _CONTEXTS:
        _CONTEXTS[key] = Context(group=group, layout=layout, deterministic=bool(deterministic))
    return _CONTEXTS[key]


def _refuse(dropout_p, alibi_slopes, return_attn_probs):
    if dropout_p:
        raise ValueError(f"dropout_p: tasp runs attention without dropout (0.0), got {dropout_p!r}")
    if alibi_slopes is not None:
        raise ValueError("alibi_slopes: tasp has no ALiBi bias; pass None")
    if not isinstance(return_attn_probs, bool):
        raise ValueError(f"return_attn_probs: expected True or False, got {return_attn_probs!r}")


def _with_lse(result, return_attn_probs):
    """ring-flash-attention's return: out, or (out, softmax_lse, None) with return_attn_probs."""
    return (result[0], result[1], None) if return_attn_probs else result


def _window(window_size):
    if window_size is None or tuple(window_size) == (-1, -1):
        return None
    return tuple(int(x) for x in window_size)


def _sharded(layout, q, k, v, dropout_p, softmax_scale, causal, window_size, alibi_slopes, deterministic,
             return_attn_probs, group):
    """The ring functions' common body: this rank's shard of a sequence laid out by `layout`."""
    _refuse(dropout_p, alibi_slopes, return_attn_probs)
    return _with_lse(attention(q, k, v, causal=causal, window=_window(window_size), softmax_scale=softmax_scale,
                               ctx=_context(group, layout, deterministic), return_lse=return_attn_probs),
                     return_attn_probs)


def ring_flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                         alibi_slopes=None, deterministic=False, return_attn_probs=False, group=None):
    """As ring_flash_attn.ring_flash_attn_func: q [B, S_local, H, D], k, v [B, S_local, Hkv, D], contiguous shards."""
    return _sharded("contiguous", q, k, v, dropout_p, softmax_scale, causal, window_size, alibi_slopes, deterministic,
                    return_attn_probs, group)


def zigzag_ring_flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                                alibi_slopes=None, deterministic=False, return_attn_probs=False, group=None):
    """As ring_flash_attn.zigzag_ring_flash_attn_func: zigzag shards (chunks r and 2n-1-r of 2n)."""
    return _sharded("zigzag", q, k, v, dropout_p, softmax_scale, causal, window_size, alibi_slopes, deterministic,
                    return_attn_probs, group)


_PREPARED = {}  # id(cu_seqlens_q returned by prepare) -> (weakref to it, the whole sequence's offsets)


def llama3_flash_attn_prepare_cu_seqlens(cu_seqlens, causal, rank, world_size):
    """As ring_flash_attn's: from the whole sequence's document offsets, this rank's (cu_seqlens_q, cu_seqlens_k,
    max_seqlen_q, max_seqlen_k, local_k_slice), the sequence split into world_size equal contiguous slices."""
    offsets = [int(x) for x in (cu_seqlens.tolist() if isinstance(cu_seqlens, torch.Tensor) else cu_seqlens)]
    total = offsets[-1] if offsets else 0
    if len(offsets) < 2 or offsets[0] != 0 or any(b <= a for a, b in zip(offsets, offsets[1:])):
        raise ValueError(f"cu_seqlens: expected increasing offsets from 0, got {offsets}")
    if not isinstance(world_size, int) or world_size < 1 or total % world_size:
        raise ValueError(f"world_size: {world_size!r} does not split the {total} tokens into equal slices")
    if not isinstance(rank, int) or not 0 <= rank < world_size:
        raise ValueError(f"rank: expected 0..{world_size - 1}, got {rank!r}")
    per = total // world_size
    lo, hi = rank * per, (rank + 1) * per
    first = max(i for i, x in enumerate(offsets) if x <= lo)   # the document holding this slice's first token
    last = min(i for i, x in enumerate(offsets) if x >= hi)    # the offset at or after the slice's end
    q_offsets = [0] + [x - lo for x in offsets[first + 1:last]] + [per]
    k_left = offsets[first]
    k_right = hi if causal else offsets[last]                  # causal: keys up to the slice's end suffice
    k_offsets = [x - k_left for x in offsets[first:last]] + [k_right - k_left]
    device = cu_seqlens.device if isinstance(cu_seqlens, torch.Tensor) else None
    cu_q = torch.tensor(q_offsets, dtype=torch.int32, device=device)
    cu_k = torch.tensor(k_offsets, dtype=torch.int32, device=device)
    _PREPARED[id(cu_q)] = (weakref.ref(cu_q), offsets)
    if len(_PREPARED) > 256:  # forget the oldest (each step prepares anew)
        for key in list(_PREPARED)[:128]:
            del _PREPARED[key]
    return (cu_q, cu_k, max(b - a for a, b in zip(q_offsets, q_offsets[1:])),
            max(b - a for a, b in zip(k_offsets, k_offsets[1:])), slice(k_left, k_right))


def llama3_flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, heads_k_stride,
                                  local_k_slice, dropout_p=0.0, softmax_scale=None, causal=False,
                                  window_size=(-1, -1), alibi_slopes=None, deterministic=False,
                                  return_attn_probs=False, group=None):
    """As ring_flash_attn.llama3_flash_attn_varlen_func: q [tokens, H, D], k, v [tokens, Hkv, D], this rank's
    contiguous slice of the packed documents; cu_seqlens_q and the rest from this module's
    llama3_flash_attn_prepare_cu_seqlens (heads_k_stride, a memory knob of the all-gather, is not needed)."""
    _refuse(dropout_p, alibi_slopes, return_attn_probs)
    entry = _PREPARED.get(id(cu_seqlens_q))
    if entry is None or entry[0]() is not cu_seqlens_q:
        raise ValueError("cu_seqlens_q: pass what tasp.torch.compat.llama3_flash_attn_prepare_cu_seqlens returned "
                         "(tasp plans the whole sequence, whose documents that call remembers)")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 3:
            raise ValueError(f"{name}: expected [tokens, heads, D], got {getattr(t, 'shape', type(t).__name__)}")
    got = attention(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), causal=causal, window=_window(window_size),
                    cu_seqlens=entry[1], softmax_scale=softmax_scale, ctx=_context(group, "contiguous", deterministic),
                    return_lse=return_attn_probs)
    if return_attn_probs:  # varlen's softmax_lse: [H, tokens]
        return got[0].squeeze(0), got[1].squeeze(0), None
    return got.squeeze(0)
