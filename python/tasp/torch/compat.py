"""ring-flash-attention's entry points over tasp (`from tasp.torch.compat import zigzag_ring_flash_attn_func`
in place of `from ring_flash_attn import ...`): the same arguments and shard layouts, run by tasp's plan for the
process group. ring_flash_attn_func takes contiguous shards (rank r holds the r-th n-th of the sequence),
zigzag_ring_flash_attn_func zigzag ones (rank r holds chunks r and 2n-1-r of 2n). Dropout, ALiBi, attention
probabilities and deterministic mode are refused with a ValueError naming the argument."""
from tasp.torch.context import Context, attention

__all__ = ["ring_flash_attn_func", "zigzag_ring_flash_attn_func"]

_CONTEXTS = {}


def _context(group, layout):
    key = (id(group) if group is not None else None, layout)
    if key not in _CONTEXTS:
        _CONTEXTS[key] = Context(group=group, layout=layout)
    return _CONTEXTS[key]


def _refuse(dropout_p, alibi_slopes, deterministic, return_attn_probs):
    if dropout_p:
        raise ValueError(f"dropout_p: tasp runs attention without dropout (0.0), got {dropout_p!r}")
    if alibi_slopes is not None:
        raise ValueError("alibi_slopes: tasp has no ALiBi bias; pass None")
    if deterministic:
        raise ValueError("deterministic: not offered through tasp.torch yet (tasp run --deterministic has it); pass False")
    if return_attn_probs:
        raise ValueError("return_attn_probs: tasp returns the output alone; pass False")


def _window(window_size):
    if window_size is None or tuple(window_size) == (-1, -1):
        return None
    return tuple(int(x) for x in window_size)


def ring_flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                         alibi_slopes=None, deterministic=False, return_attn_probs=False, group=None):
    """As ring_flash_attn.ring_flash_attn_func: q [B, S_local, H, D], k, v [B, S_local, Hkv, D], contiguous shards."""
    _refuse(dropout_p, alibi_slopes, deterministic, return_attn_probs)
    return attention(q, k, v, causal=causal, window=_window(window_size), softmax_scale=softmax_scale,
                     ctx=_context(group, "contiguous"))


def zigzag_ring_flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                                alibi_slopes=None, deterministic=False, return_attn_probs=False, group=None):
    """As ring_flash_attn.zigzag_ring_flash_attn_func: zigzag shards (chunks r and 2n-1-r of 2n)."""
    _refuse(dropout_p, alibi_slopes, deterministic, return_attn_probs)
    return attention(q, k, v, causal=causal, window=_window(window_size), softmax_scale=softmax_scale,
                     ctx=_context(group, "zigzag"))
