"""The baselines a PyTorch user builds today for context parallelism, the three families TransformerEngine offers,
on PyTorch's own attention ops (cuDNN or FlashAttention-2 through torch.ops.aten._scaled_dot_product_{cudnn,flash}_
attention[_backward]), forward and backward, on this rank's shard over the default process group:
  ring       ring-flash-attention's ring (full masks) and zigzag ring (causal): K/V exchanged with batch_isend_irecv
             overlapped with each block, dK/dV sums (fp32) travelling one hop behind K/V;
  ulysses    DeepSpeed-Ulysses as yunchang/USP write it: all_to_all_single of Q, K, V to head shards (with the
             reshapes around it), one attention over every token, the output back; the backward likewise (dO in;
             dQ, dK, dV out); K/V heads fewer than the GPUs are replicated first (their dK/dV summed after);
  allgather  llama3 / Megatron style: K/V all-gathered once (kept for the backward), this rank's queries (the zigzag
             shard when causal) against them, dK/dV reduce-scattered in bf16.
GQA (Hkv < H): K/V move with Hkv heads and are expanded to H just before each kernel (dK/dV summed back).

Tensors here are [B, heads, S_local, D] (the kernels' layout); `baseline` makes an algorithm's forward and fwd+bwd
calls for a shard (kernel "cudnn" or "fa2" on GPUs; "math", attention written out, checks the algorithms on the CPU).
Used by `python -m tasp.bench --baseline` and tools/gpu/lib/torch_ring.py (the GPU scripts'
side-by-side runs); needs GPUs and NCCL, never a build dependency."""
import math

import torch
import torch.distributed as dist

ALGOS = ("ring", "ulysses", "allgather")


def expand(x, g):
    """K/V of Hkv heads as the H = g * Hkv heads the kernels take (query head h reads K/V head h // g)."""
    return x if g == 1 else x.repeat_interleave(g, dim=1)


def fold(x, g):
    """dK/dV of H heads summed back onto their Hkv K/V heads."""
    return x if g == 1 else x.unflatten(1, (x.shape[1] // g, g)).sum(2)


# ---- one block: (out, lse, aux) forward and (dq, dk, dv) backward on the chosen kernel; tensors [B, H, S, D]

def block_fwd(kernel, q, k, v, causal):
    if kernel == "math":  # the algorithms' own check on the CPU (tests/python/test_baselines.py)
        o, lse = _math_fwd(q, k, v, causal)
        return o, lse, None
    if kernel == "cudnn":
        r = torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, causal, False)
    else:
        r = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False)
    out, lse = r[0], r[1]
    return out, lse.reshape(q.shape[0], q.shape[1], q.shape[2]).float(), (r, lse.shape)


def _math_fwd(q, k, v, causal):
    """Attention written out ([B, H, S, D]; a causal block's query i sees keys 0..i): out and its natural-log LSE."""
    s = torch.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    lse = torch.logsumexp(s, -1)
    return torch.einsum("bhij,bhjd->bhid", torch.exp(s - lse.unsqueeze(-1)), v), lse.float()


def block_bwd(kernel, dout, q, k, v, out, lse, causal, aux):
    if kernel == "math":  # the flash backward of one block against the whole row's out and LSE
        scale = 1 / math.sqrt(q.shape[-1])
        s = torch.einsum("bhid,bhjd->bhij", q, k) * scale
        if causal:
            s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
        p = torch.exp(s - lse.to(s.dtype).unsqueeze(-1))
        dp = torch.einsum("bhid,bhjd->bhij", dout, v)
        ds = p * (dp - (dout * out.to(dout.dtype)).sum(-1, keepdim=True))
        return (torch.einsum("bhij,bhjd->bhid", ds, k) * scale, torch.einsum("bhij,bhid->bhjd", ds, q) * scale,
                torch.einsum("bhij,bhid->bhjd", p, dout))
    r, lse_shape = aux
    lse = lse.reshape(lse_shape).contiguous()
    if kernel == "cudnn":
        # (grad_out, q, k, v, out, logsumexp, philox_seed, philox_offset, attn_bias, cum_seq_q, cum_seq_k, max_q, max_k,
        #  dropout_p, is_causal)
        return torch.ops.aten._scaled_dot_product_cudnn_attention_backward(
            dout, q, k, v, out, lse, r[6], r[7], None, r[2], r[3], q.shape[2], k.shape[2], 0.0, causal)
    # (grad_out, q, k, v, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, philox_seed, philox_offset)
    return torch.ops.aten._scaled_dot_product_flash_attention_backward(
        dout, q, k, v, out, lse, r[2], r[3], q.shape[2], k.shape[2], 0.0, causal, r[6], r[7])


def merge(out, lse, bout, blse):
    """Folds a block's (out, lse) into the running fp32 (out, lse) in place (from out = 0, lse = -inf)."""
    new = torch.logaddexp(lse, blse)
    out.mul_(torch.exp(lse - new).unsqueeze(-1)).add_(bout.float() * torch.exp(blse - new).unsqueeze(-1))
    lse.copy_(new)


class Ring:
    """One rank's ring exchange: send to rank+1, receive from rank-1, overlapped with the block it runs."""

    def __init__(self, rank, n):
        self.rank, self.n, self.reqs = rank, n, []

    def start(self, *tensors):
        outs = [torch.empty_like(t) for t in tensors]
        ops = []
        for t, o in zip(tensors, outs):
            ops.append(dist.P2POp(dist.isend, t.contiguous(), (self.rank + 1) % self.n))
            ops.append(dist.P2POp(dist.irecv, o, (self.rank - 1) % self.n))
        self.reqs = dist.batch_isend_irecv(ops)
        return outs

    def wait(self):
        for r in self.reqs:
            r.wait()
        self.reqs = []


def forward(kernel, q, k, v, causal, rank, n):
    """Ring (full) or zigzag ring (causal; each rank holds chunks rank and 2n-1-rank, back to back)."""
    half, g = q.shape[2] // 2, q.shape[1] // k.shape[1]
    out = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    lse = torch.full(q.shape[:3], -float("inf"), dtype=torch.float32, device=q.device)
    aux = []
    kv = Ring(rank, n)
    for step in range(n):
        if step + 1 < n:
            nk, nv = kv.start(k, v)
        if step == 0 or not causal:
            bo, bl, a = block_fwd(kernel, q, expand(k, g), expand(v, g), causal)
            merge(out, lse, bo, bl)
        elif step <= rank:  # their first chunk precedes both of ours: all of our queries see it
            bo, bl, a = block_fwd(kernel, q, expand(k[:, :, :half], g).contiguous(), expand(v[:, :, :half], g).contiguous(),
                                  False)
            merge(out, lse, bo, bl)
        else:  # both of their chunks precede our second one only
            bo, bl, a = block_fwd(kernel, q[:, :, half:].contiguous(), expand(k, g), expand(v, g), False)
            o2, l2 = out[:, :, half:], lse[:, :, half:]
            merge(o2, l2, bo, bl)
        aux.append(a)
        if step + 1 < n:
            kv.wait()
            k, v = nk, nv
    return out.to(q.dtype), lse, aux


def backward(kernel, dout, q, k, v, out, lse, causal, aux, rank, n):
    half, g = q.shape[2] // 2, q.shape[1] // k.shape[1]
    dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    dk = dv = None
    kv, dkv = Ring(rank, n), Ring(rank, n)
    for step in range(n):
        if step + 1 < n:
            nk, nv = kv.start(k, v)
        if step == 0 or not causal:
            bq, bk, bv = block_bwd(kernel, dout, q, expand(k, g), expand(v, g), out, lse, causal and step == 0, aux[step])
            dq.add_(bq)
            part = slice(None)
        elif step <= rank:
            bq, bk, bv = block_bwd(kernel, dout, q, expand(k[:, :, :half], g).contiguous(),
                                   expand(v[:, :, :half], g).contiguous(), out, lse, False, aux[step])
            dq.add_(bq)
            part = slice(0, half)
        else:
            bq, bk, bv = block_bwd(kernel, dout[:, :, half:].contiguous(), q[:, :, half:].contiguous(), expand(k, g),
                                   expand(v, g), out[:, :, half:].contiguous(), lse[:, :, half:].contiguous(), False,
                                   aux[step])
            dq[:, :, half:].add_(bq)
            part = slice(None)
        if step == 0:
            dk = torch.zeros(k.shape, dtype=torch.float32, device=k.device)
            dv = torch.zeros_like(dk)
        else:
            dkv.wait()
            dk, dv = ndk, ndv  # the accumulators of the piece we hold now, one hop behind it
        dk[:, :, part].add_(fold(bk, g))
        dv[:, :, part].add_(fold(bv, g))
        if step + 1 < n:
            kv.wait()
            k, v = nk, nv
        ndk, ndv = dkv.start(dk, dv)
    dkv.wait()
    return dq, ndk, ndv


# ---- DeepSpeed-Ulysses as yunchang / USP write it: all_to_all_single around one local attention over every token

def a2a_heads(x, n):
    """[B, H, s, D] (this rank's tokens, every head) -> [B, H/n, n*s, D] (this rank's heads, every token)."""
    B, H, s, D = x.shape
    send = x.reshape(B, n, H // n, s, D).transpose(0, 1).contiguous()  # [peer, B, H/n, s, D]
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)  # recv[j]: rank j's tokens of our heads
    return recv.permute(1, 2, 0, 3, 4).reshape(B, H // n, n * s, D)


def a2a_tokens(x, n):
    """The inverse: [B, H/n, n*s, D] -> [B, H, s, D]."""
    B, h, S, D = x.shape
    send = x.reshape(B, h, n, S // n, D).permute(2, 0, 1, 3, 4).contiguous()  # [peer, B, H/n, s, D]
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)  # recv[j]: our tokens of rank j's heads
    return recv.transpose(0, 1).reshape(B, n * h, S // n, D)


def ulysses_forward(kernel, q, k, v, causal, n):
    r = max(1, n // k.shape[1])  # K/V heads fewer than the GPUs: each replicated r times, one per GPU
    qh = a2a_heads(q, n)
    kh, vh = (a2a_heads(expand(x, r), n) for x in (k, v))
    g = qh.shape[1] // kh.shape[1]
    o, lse, aux = block_fwd(kernel, qh, expand(kh, g), expand(vh, g), causal)
    return a2a_tokens(o, n), (qh, kh, vh, o, lse, aux, r, g)


def ulysses_backward(kernel, dout, saved, causal, n):
    qh, kh, vh, o, lse, aux, r, g = saved
    dq, dk, dv = block_bwd(kernel, a2a_heads(dout, n), qh, expand(kh, g), expand(vh, g), o, lse, causal, aux)
    return a2a_tokens(dq, n), fold(a2a_tokens(fold(dk, g), n), r), fold(a2a_tokens(fold(dv, g), n), r)


# ---- llama3 / Megatron-style all-gather: K/V gathered once, this rank's queries against the sequence, dK/dV
# reduce-scattered (bf16, as the tensors are)

def gather_blocks(S, rank, n, causal):
    """(query rows of this shard, first key, last key, causal) blocks against the gathered sequence; under a causal
    mask the shard is the zigzag pair of chunks and each chunk sees the keys before it (full) and its own (causal)."""
    if not causal:
        return [(slice(None), 0, S, False)]
    c, blocks = S // (2 * n), []
    for i, chunk in enumerate((rank, 2 * n - 1 - rank)):
        rows = slice(i * c, (i + 1) * c)
        if chunk:
            blocks.append((rows, 0, chunk * c, False))
        blocks.append((rows, chunk * c, (chunk + 1) * c, True))
    return blocks


def allgather_forward(kernel, q, k, v, causal, rank, n):
    S, g = q.shape[2] * n, q.shape[1] // k.shape[1]
    kv = []
    for x in (k, v):
        # The ranks' shards one after another along dim 0 (the layout every backend's all-gather takes), viewed per rank.
        parts = torch.empty((n * x.shape[0],) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device)
        dist.all_gather_into_tensor(parts, x.contiguous())
        kv.append(expand(unshard(list(parts.view((n,) + tuple(x.shape))), n, causal), g))
    out = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    lse = torch.full(q.shape[:3], -float("inf"), dtype=torch.float32, device=q.device)
    aux = []
    for rows, k0, k1, c in gather_blocks(S, rank, n, causal):
        bo, bl, a = block_fwd(kernel, q[:, :, rows].contiguous(), kv[0][:, :, k0:k1].contiguous(),
                              kv[1][:, :, k0:k1].contiguous(), c)
        merge(out[:, :, rows], lse[:, :, rows], bo, bl)
        aux.append(a)
    return out.to(q.dtype), lse, (kv, aux, g)


def allgather_backward(kernel, dout, q, out, lse, causal, saved, rank, n):
    (kf, vf), aux, g = saved
    S = q.shape[2] * n
    dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    dk, dv = torch.zeros(kf.shape, dtype=torch.float32, device=q.device), torch.zeros(vf.shape, dtype=torch.float32, device=q.device)
    for (rows, k0, k1, c), a in zip(gather_blocks(S, rank, n, causal), aux):
        bq, bk, bv = block_bwd(kernel, dout[:, :, rows].contiguous(), q[:, :, rows].contiguous(),
                               kf[:, :, k0:k1].contiguous(), vf[:, :, k0:k1].contiguous(), out[:, :, rows].contiguous(),
                               lse[:, :, rows].contiguous(), c, a)
        dq[:, :, rows].add_(bq)
        dk[:, :, k0:k1].add_(bk)
        dv[:, :, k0:k1].add_(bv)
    res = []
    for x in (dk, dv):
        x = fold(x, g).to(q.dtype)
        send = torch.cat([shard(x, j, n, causal) for j in range(n)])  # rank j's block j-th along dim 0
        recv = send.new_empty((send.shape[0] // n,) + tuple(send.shape[1:]))
        dist.reduce_scatter_tensor(recv, send)
        res.append(recv)
    return dq, res[0], res[1]


def shard(x, rank, n, causal):
    """This rank's tokens of [B, H, S, D]: contiguous shard, or zigzag chunks rank and 2n-1-rank."""
    S = x.shape[2]
    if not causal:
        c = S // n
        return x[:, :, rank * c:(rank + 1) * c].contiguous()
    c = S // (2 * n)
    return torch.cat([x[:, :, rank * c:(rank + 1) * c], x[:, :, (2 * n - 1 - rank) * c:(2 * n - rank) * c]], 2).contiguous()


def unshard(parts, n, causal):
    if not causal:
        return torch.cat(parts, 2)
    c = parts[0].shape[2] // 2
    chunks = [None] * (2 * n)
    for r, p in enumerate(parts):
        chunks[r], chunks[2 * n - 1 - r] = p[:, :, :c], p[:, :, c:]
    return torch.cat(chunks, 2)


def timed(fn):
    """fn() once on this rank, in ms (CUDA events)."""
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b)


def heat(fn, heat_ms):
    """Runs fn for at least heat_ms before it is timed, as `tasp run --heat-ms` does: the power limiter settles over
    about a second, and a run timed sooner reads what ran before it (docs/measurements/kernels.md, how it is timed).
    Every rank runs the same number of calls (the slowest rank's count), so that their collectives pair up."""
    if heat_ms <= 0:
        return
    dist.barrier()
    calls = torch.tensor([math.ceil(heat_ms / max(timed(fn), 1e-3))], device="cuda")
    dist.all_reduce(calls, op=dist.ReduceOp.MAX)
    for i in range(int(calls.item())):
        fn()
        if i % 8 == 7:
            torch.cuda.synchronize()  # the host stays a few calls ahead at most
    torch.cuda.synchronize()


def median_ms(fn, warmup, iters, heat_ms, back_to_back=True):
    """fn's median time in ms over `iters` calls, each the slowest rank's, after `warmup` calls and heat_ms of heat.
    back_to_back: the calls enqueued one after the other with an event pair around each, the host running ahead as in
    a training step (the way `tasp run` and triton's do_bench time); otherwise each call starts from an idle GPU after
    a barrier, so its host latency (Python, dispatch, launches before the first kernel) counts too."""
    for _ in range(warmup):
        fn()
    heat(fn, heat_ms)
    dist.barrier()
    if back_to_back:
        torch.cuda.synchronize()
        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
        for a, b in pairs:
            a.record()
            fn()
            b.record()
        torch.cuda.synchronize()
        ms = [a.elapsed_time(b) for a, b in pairs]
    else:
        ms = []
        for _ in range(iters):
            dist.barrier()
            ms.append(timed(fn))
    t = torch.tensor(ms, device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank, call by call
    return sorted(t.tolist())[len(ms) // 2]


def name_of(algo, causal):
    """The name a baseline reports: the ring is the zigzag ring under a causal mask."""
    return algo if algo != "ring" else "zigzag" if causal else "ring"


def splits(algo, H, Hkv, n):
    """Empty when `algo` can split H query and Hkv K/V heads over n GPUs (Ulysses moves heads), else why not."""
    if algo not in ALGOS:
        return f"{algo}: expected one of {', '.join(ALGOS)}"
    if algo == "ulysses" and (H % n or (Hkv % n and n % Hkv)):
        return f"ulysses: H={H}, Hkv={Hkv} do not split over {n} GPUs"
    return ""


def baseline(algo, kernel, full, causal, rank, n):
    """(forward, fwd+bwd) calls of `algo` on this rank's shard of the full [B, heads, S, D] tensors q, k, v, dO (the
    zigzag pair of chunks under a causal mask, a contiguous shard otherwise; Ulysses takes contiguous shards)."""
    uly = algo == "ulysses"
    q, k, v, do = (shard(x, rank, n, causal and not uly) for x in full)

    def fwd():
        if uly:
            return ulysses_forward(kernel, q, k, v, causal, n)
        if algo == "allgather":
            return allgather_forward(kernel, q, k, v, causal, rank, n)
        return forward(kernel, q, k, v, causal, rank, n)

    def fwd_bwd():
        if uly:
            o, saved = fwd()
            return o, ulysses_backward(kernel, do, saved, causal, n)
        o, l, aux = fwd()
        if algo == "allgather":
            return o, allgather_backward(kernel, do, q, o, l, causal, aux, rank, n)
        return o, backward(kernel, do, q, k, v, o, l, causal, aux, rank, n)

    return fwd, fwd_bwd
