"""tasp's attention as PyTorch custom ops (torch.library), so that torch.compile keeps it as one opaque node with
known output shapes instead of breaking the graph: tasp::attention_fwd (q, k, v -> out, lse) and
tasp::attention_bwd (dO, q, k, v, out, lse -> dq, dk, dv), joined by autograd. A plan's rank is named by an integer
(`register`), since ops take tensors and numbers only. The work goes onto PyTorch's current stream (bindings/tasp.h)."""
import torch

from tasp._lib import check, lib

_RANKS = []  # register(rank) -> index; ranks live as long as their Context keeps them


def register(rank):
    """The integer the ops take for `rank` (a tasp.torch.context._Rank)."""
    _RANKS.append(rank)
    return len(_RANKS) - 1


def _stream(t):
    return torch.cuda.current_stream(t.device).cuda_stream


@torch.library.custom_op("tasp::attention_fwd", mutates_args=())
def attention_fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    B, S, H, _ = q.shape
    out = torch.empty_like(q)
    lse = torch.empty(B, H, S, dtype=torch.float32, device=q.device)
    check(lib.tasp_rank_forward(_RANKS[rank].handle, q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
                                lse.data_ptr(), _stream(q)), "attention")
    return out, lse


@attention_fwd.register_fake
def _(q, k, v, rank):
    B, S, H, _ = q.shape
    return torch.empty_like(q), q.new_empty(B, H, S, dtype=torch.float32)


@torch.library.custom_op("tasp::attention_bwd", mutates_args=())
def attention_bwd(dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                  lse: torch.Tensor, rank: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    check(lib.tasp_rank_backward(_RANKS[rank].handle, q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
                                 lse.data_ptr(), dout.contiguous().data_ptr(), dq.data_ptr(), dk.data_ptr(), dv.data_ptr(),
                                 _stream(q)), "attention backward")
    return dq, dk, dv


@attention_bwd.register_fake
def _(dout, q, k, v, out, lse, rank):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _setup(ctx, inputs, output):
    q, k, v, rank = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.rank = rank


def _backward(ctx, dout, dlse):
    q, k, v, out, lse = ctx.saved_tensors
    dq, dk, dv = attention_bwd(dout, q, k, v, out, lse, ctx.rank)
    return dq, dk, dv, None


attention_fwd.register_autograd(_backward, setup_context=_setup)
