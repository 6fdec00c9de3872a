"""tasp.torch.attention on GPUs against one-GPU SDPA on the whole sequence (run under torchrun, one process per GPU):
every token-parallel scheme, bf16 and fp16, full, causal, GQA, a window and packed documents (cu_seqlens), head dims
64, 80, 96, 128 and 256, forward and backward, and the ring-flash-attention compat functions on their own layouts. Random normal inputs, the same on
every rank (seeded); each rank's shard laid out by Context.shard, results gathered by Context.unshard. Prints one
line per case on rank 0 and exits 1 when any is over tolerance: relative error out 1e-2, gradients 2e-2; and element by
element ring-flash-attention's tests' rtol=atol (out 1e-3, gradients 1e-2) judged against one-GPU SDPA in the same
dtype: no worse than it by the share of elements over and by the worst excess (`close`). The raw tolerance alone is out
of reach for any bf16 kernel: causal rows that see few keys reach |out| of 1-4, where one bf16 step is 7.8e-3 to
3.1e-2, and P rounded to bf16 before P V costs a few 1e-3 where |out| is small; on 2x H200 (2026-11-26) SDPA's own bf16
output misses it at 0.06-0.24% of the elements under a causal mask, and tasp's at the same shares.
Usage: torchrun --nproc_per_node=N tests/python/gpu/check_attention.py   (tools/gpu/python.sh)"""
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

import tasp.torch as tt
from tasp.torch import compat

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from reference import allowed  # noqa: E402 (the [S, S] mask of tests/python/reference.py)


def reference(q, k, v, dout, causal, window, cu, dtype=torch.float32, scale=None):
    """SDPA on one GPU on the whole sequence ([B, S, H, D] in and out) in `dtype` (fp32: the reference; the inputs'
    dtype: the witness of what a 16-bit result can reach), an explicit mask for windows and documents."""
    qf, kf, vf = (x.to(dtype).transpose(1, 2).detach().requires_grad_() for x in (q, k, v))
    S = q.shape[1]
    mask = allowed(S, causal, window, cu).to(q.device) if window is not None or cu is not None else None
    o = F.scaled_dot_product_attention(qf, kf, vf, attn_mask=mask, is_causal=causal and mask is None,
                                       enable_gqa=k.shape[2] != q.shape[2], scale=scale)
    o.backward(dout.to(dtype).transpose(1, 2))
    return o.transpose(1, 2), qf.grad.transpose(1, 2), kf.grad.transpose(1, 2), vf.grad.transpose(1, 2)


def rel(x, r):
    return ((x.float() - r.float()).norm() / r.float().norm()).item()


def close(full, ref, same):
    """Element by element, ring-flash-attention's rtol=atol (out 1e-3, gradients 1e-2), judged against what one-GPU
    SDPA in the same dtype (`same`) reaches: per tensor, the share of elements over the tolerance at most 1.5x SDPA's
    (plus 0.01%) and the worst |diff| / (atol + rtol |ref|) at most 2x SDPA's (or within 1). Returns (None or the
    first tensor that misses, 'raw misses: tasp a%, SDPA b%' of the output)."""
    far, raw = None, ""
    for name, x, r, s, tol in zip(("out", "dq", "dk", "dv"), full, ref, same, (1e-3, 1e-2, 1e-2, 1e-2)):
        r = r.float()
        bound = tol + tol * r.abs()
        miss, worst = [], []
        for y in (x, s):
            q = (y.float() - r).abs() / bound
            miss.append(100 * q.gt(1).float().mean().item())
            worst.append(q.max().item())
        if far is None and (miss[0] > 1.5 * miss[1] + 0.01 or worst[0] > max(1.0, 2 * worst[1])):
            far = (f"{name}: {miss[0]:.3f}% over rtol=atol={tol:g} (SDPA {miss[1]:.3f}%), worst {worst[0]:.2f}x the "
                   f"tolerance (SDPA {worst[1]:.2f}x)")
        if name == "out":
            raw = f"raw misses: tasp {miss[0]:.2f}%, SDPA {miss[1]:.2f}% (worst {worst[0]:.1f}x, {worst[1]:.1f}x)"
    return far, raw


def judge(label, got, inputs, causal, window, cu, rank, note="", scale=None):
    """`got` (out, dq, dk, dv over the whole sequence) against SDPA on `inputs` (q, k, v, dout): one line on rank 0,
    True when within the tolerances above."""
    ref = reference(*inputs, causal, window, cu, scale=scale)
    same = reference(*inputs, causal, window, cu, inputs[0].dtype, scale=scale)
    errs = [rel(x, r) for x, r in zip(got, ref)]
    far, raw = close(got, ref, same)
    ok = errs[0] < 1e-2 and max(errs[1:]) < 2e-2 and far is None
    if rank == 0:
        print(f"{'PASS' if ok else 'FAIL'} {label}: out {errs[0]:.1e} dq {errs[1]:.1e} dk {errs[2]:.1e} dv {errs[3]:.1e}; "
              f"{raw}{'  [' + note + ']' if note else ''}{'  ' + far if far else ''}", flush=True)
    return ok


def causal_pass(ctx, full, **kw):
    """q, k, v of `full` (q, k, v, dout over the whole sequence) sharded causally through `ctx`, attention forward and
    backward; this rank's inputs, and out, dq, dk, dv over the whole sequence."""
    mine = [ctx.shard(x, 1, causal=True).contiguous().requires_grad_() for x in full[:3]]
    out = tt.attention(*mine, causal=True, ctx=ctx, **kw)
    out.backward(ctx.shard(full[3], 1, causal=True))
    return mine, [ctx.unshard(x, 1, causal=True) for x in [out] + [m.grad for m in mine]]


def two_layer_pass(ctx, fulls):
    """Two layers of the same shape through `ctx` (one rank runner for both), both forwards before either backward, as
    a model runs them: what a layer keeps from its forward for its backward must be its own. Per layer: its inputs
    and out, dq, dk, dv over the whole sequence."""
    mines = [[ctx.shard(x, 1, causal=True).contiguous().requires_grad_() for x in full[:3]] for full in fulls]
    outs = [tt.attention(*mine, causal=True, ctx=ctx) for mine in mines]
    torch.autograd.backward(outs[::-1], [ctx.shard(full[3], 1, causal=True) for full in fulls[::-1]])
    return [(mine, [ctx.unshard(x, 1, causal=True) for x in [out] + [m.grad for m in mine]]) for mine, out in zip(mines, outs)]


def main():
    dist.init_process_group("nccl")
    rank, n = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dev = torch.device("cuda", torch.cuda.current_device())
    S = 2048 * n
    cases = []  # (name, scheme, dtype, B, H, Hkv, D, causal, window, cu, fn)
    for scheme in ("ring", "zigzag", "allgather", "hamilton"):
        for causal in (False, True):
            if scheme == "zigzag" and not causal:
                continue
            cases.append((scheme, torch.bfloat16, 2, 8, 8, 128, causal, None, None, None))
    cases += [("allgather", torch.float16, 1, 8, 8, 128, True, None, None, None),
              ("auto", torch.bfloat16, 1, 16, 4, 128, True, None, None, None),      # GQA 4:1
              ("auto", torch.bfloat16, 1, 8, 1, 64, False, None, None, None),       # MQA, D=64
              ("ring", torch.bfloat16, 1, 8, 2, 128, True, (700, 0), None, None),   # window
              ("auto", torch.bfloat16, 1, 8, 2, 128, True, None, [0, 1000, 1001, 3500, S], None),  # documents
              ("auto", torch.bfloat16, 1, 16, 4, 80, True, None, None, None),       # head dims of the new backward
              ("allgather", torch.bfloat16, 1, 8, 8, 96, False, None, None, None),
              ("zigzag", torch.bfloat16, 1, 8, 8, 256, True, None, None, None),
              ("ulysses", torch.bfloat16, 2, 8, 8, 128, True, None, None, None),     # head-parallel through a rank
              ("ulysses", torch.bfloat16, 1, 16, 4, 128, False, None, None, None),
              ("ulysses", torch.float16, 1, 8, 8, 64, True, (500, 0), None, None)]
    for layout, fn in (("contiguous", compat.ring_flash_attn_func), ("zigzag", compat.zigzag_ring_flash_attn_func)):
        cases.append((f"compat {fn.__name__}", torch.bfloat16, 1, 32, 32, 128, True, None, None, (layout, fn)))
    bad = 0
    for name, dtype, B, H, Hkv, D, causal, window, cu, fn in cases:
        g = torch.Generator(device=dev).manual_seed(11)
        q, dout = (torch.randn(B, S, H, D, generator=g, device=dev, dtype=dtype) for _ in range(2))
        k, v = (torch.randn(B, S, Hkv, D, generator=g, device=dev, dtype=dtype) for _ in range(2))
        scheme = name if not name.startswith("compat") else "auto"
        ctx = tt.Context(scheme=scheme, layout=fn[0] if fn else None)
        lay = dict(causal=causal, cu_seqlens=cu)
        if fn:  # ring-flash-attention's own layouts, sharded by hand as its users do
            c = S // (2 * n)

            def tokens_of(r):  # ring-flash-attention's layouts: r's n-th, or its chunks r and 2n-1-r of 2n
                if fn[0] == "contiguous":
                    return list(range(r * 2 * c, (r + 1) * 2 * c))
                return list(range(r * c, (r + 1) * c)) + list(range((2 * n - 1 - r) * c, (2 * n - r) * c))

            idx = tokens_of(rank)
            mine = [x[:, idx].contiguous().requires_grad_() for x in (q, k, v)]
            out = fn[1](*mine, causal=causal)
            out.backward(dout[:, idx])
            got = [out] + [x.grad for x in mine]
            full = []
            for x in got:
                parts = [torch.empty_like(x) for _ in range(n)]
                dist.all_gather(parts, x.contiguous())
                order = [t for r in range(n) for t in tokens_of(r)]
                y = torch.empty_like(torch.cat(parts, 1))
                y[:, order] = torch.cat(parts, 1)
                full.append(y)
        else:
            mine = [ctx.shard(x, 1, **lay).contiguous().requires_grad_() for x in (q, k, v)]
            out = tt.attention(*mine, causal=causal, window=window, cu_seqlens=cu, ctx=ctx)
            out.backward(ctx.shard(dout, 1, **lay))
            full = [ctx.unshard(x, 1, **lay) for x in [out] + [m.grad for m in mine]]
        what = ctx.scheme_for(mine[0], mine[1], causal, window, cu) if not fn else "compat"
        label = (f"{name:34} {str(dtype)[6:]:8} B={B} S={S} H={H}/{Hkv} D={D}{' causal' if causal else ''}"
                 f"{' window' if window else ''}{' docs' if cu else ''}")
        bad += not judge(label, full, (q, k, v, dout), causal, window, cu, rank, what[:60])
    # llama3_flash_attn_varlen_func: packed documents [tokens, H, D] split contiguously, ring-flash-attention's way;
    # then its own test's shape: 8 ragged sequences packed to 8k tokens, 32 heads of 128.
    for cu, H, Hkv in (([0, 1000, 1001, 3500, S], 16, 4),
                       ([0, 1000, 2700, 3000, 4200, 5100, 6600, 7200, 8192], 32, 32)):
        T = cu[-1]
        if T % n:  # the contiguous split needs equal parts
            continue
        g = torch.Generator(device=dev).manual_seed(3)
        q, dout = (torch.randn(1, T, H, 128, generator=g, device=dev, dtype=torch.bfloat16) for _ in range(2))
        k, v = (torch.randn(1, T, Hkv, 128, generator=g, device=dev, dtype=torch.bfloat16) for _ in range(2))
        L = T // n
        prep = compat.llama3_flash_attn_prepare_cu_seqlens(torch.tensor(cu, dtype=torch.int32, device=dev), True, rank, n)
        mine = [x[0, rank * L:(rank + 1) * L].contiguous().requires_grad_() for x in (q, k, v)]
        out = compat.llama3_flash_attn_varlen_func(*mine, *prep[:4], 1, prep[4], causal=True)
        out.backward(dout[0, rank * L:(rank + 1) * L])
        full = []
        for x in [out] + [m.grad for m in mine]:
            parts = [torch.empty_like(x) for _ in range(n)]
            dist.all_gather(parts, x.contiguous())
            full.append(torch.cat(parts, 0).unsqueeze(0))
        bad += not judge(f"compat llama3_flash_attn_varlen_func  bf16  S={T} H={H}/{Hkv} D=128 causal {len(cu) - 1} docs",
                         full, (q, k, v, dout), True, None, cu, rank)

    # softmax_scale: the kernels' own scale (no scaled copy of q), forward and backward.
    ctx = tt.Context(scheme="allgather")
    g = torch.Generator(device=dev).manual_seed(13)
    full = [torch.randn(1, S, h, 128, generator=g, device=dev, dtype=torch.bfloat16) for h in (8, 4, 4, 8)]
    _, got = causal_pass(ctx, full, softmax_scale=0.05)
    bad += not judge("allgather softmax_scale=0.05 bf16 H=8/4 causal", got, full, True, None, None, rank, scale=0.05)

    # allgather's gathers and reduce-scatters as NCCL collectives through a rank (Context(collectives=True)): the K/V
    # kept for the backward (bf16, one broadcast and one reduce a root: root_comms), and gathered again where a memory
    # budget keeps none (fp16, one all-gather and one reduce-scatter).
    for budget, dtype, roots in ((None, torch.bfloat16, True), (1e-6, torch.float16, False)):
        ctx = tt.Context(scheme="allgather", collectives=True, memory_budget=budget, root_comms=roots)
        g = torch.Generator(device=dev).manual_seed(19)
        full = [torch.randn(2, S, h, 128, generator=g, device=dev, dtype=dtype) for h in (8, 4, 4, 8)]
        mine, got = causal_pass(ctx, full)
        info = ctx._rank_for(mine[0], mine[1], True, None, None).plan.info
        note = f"collectives {info['collectives']}, one a root {info['root_comms']}, K/V kept {info['keeps_kv']}"
        ok = judge(f"allgather collectives {str(dtype)[6:]:8} B=2 H=8/4 causal", got, full, True, None, None, rank, note)
        # the path meant, or the case is void
        engaged = info["collectives"] and info["root_comms"] == roots and info["keeps_kv"] == (budget is None)
        if rank == 0 and not engaged:
            print(f"FAIL allgather collectives: the plan did not take the path meant ({note})", flush=True)
        bad += not (ok and engaged)

    # allgather in pieces through a rank (Context(gather_pieces=P)): MHA bf16 as collectives, each piece's dK/dV written
    # by the kernel in 16 bits into its piece-major block of the reduce-scatter; GQA fp16 in 3 pieces as send/recv; GQA
    # bf16 in 4 gathered in steps of 2, 1, 1 (Context(gather_steps=...)) as collectives.
    for P, coll, dtype, hkv, steps in ((2, True, torch.bfloat16, 8, None), (3, False, torch.float16, 4, None),
                                       (4, True, torch.bfloat16, 4, (2, 1, 1))):
        ctx = tt.Context(scheme="allgather", collectives=coll, gather_pieces=P, root_comms=coll, gather_steps=steps)
        g = torch.Generator(device=dev).manual_seed(23)
        full = [torch.randn(2, S, h, 128, generator=g, device=dev, dtype=dtype) for h in (8, hkv, hkv, 8)]
        mine, got = causal_pass(ctx, full)
        info = ctx._rank_for(mine[0], mine[1], True, None, None).plan.info
        note = f"pieces {info['pieces_per_rank']}, collectives {info['collectives']}"
        ok = judge(f"allgather in {P} pieces {str(dtype)[6:]:8} B=2 H=8/{hkv} causal", got, full, True, None, None, rank, note)
        engaged = info["pieces_per_rank"] == P and info["collectives"] == coll and info["gather_steps"] == list(steps or ())
        if rank == 0 and not engaged:
            print(f"FAIL allgather in pieces: the plan did not take the path meant ({note})", flush=True)
        bad += not (ok and engaged)

    # allgather pruned for the causal mask through a rank (Context(prune_plain=True)): pieces cut by chunk, the late
    # chunk's pieces kept home; MHA bf16 in 4 gathered in steps of 3, 1 as broadcasts a root (host memory's choice),
    # GQA fp16 in 2 as send/recv.
    for P, coll, dtype, hkv, steps in ((4, True, torch.bfloat16, 8, (3, 1)), (2, False, torch.float16, 4, None)):
        ctx = tt.Context(scheme="allgather", collectives=coll, gather_pieces=P, root_comms=coll, gather_steps=steps,
                         prune_plain=True)
        g = torch.Generator(device=dev).manual_seed(29)
        full = [torch.randn(2, S, h, 128, generator=g, device=dev, dtype=dtype) for h in (8, hkv, hkv, 8)]
        mine, got = causal_pass(ctx, full)
        info = ctx._rank_for(mine[0], mine[1], True, None, None).plan.info
        note = f"pieces {info['pieces_per_rank']}, by chunk {info['pieces_by_chunk']}, pruned {info['pruned']}"
        ok = judge(f"allgather pruned in {P} pieces {str(dtype)[6:]:8} B=2 H=8/{hkv} causal", got, full, True, None, None,
                   rank, note)
        engaged = info["pieces_per_rank"] == P and info["pieces_by_chunk"] and info["pruned"]
        if rank == 0 and not engaged:
            print(f"FAIL allgather pruned: the plan did not take the path meant ({note})", flush=True)
        bad += not (ok and engaged)

    # queries moved (Context(move_queries=True), 2 ranks): rank 0's late chunk's queries computed at rank 1, their
    # partial out merged into rank 0's and their dQ added into its 16-bit dQ; two layers of one runner, both forwards
    # first (the moved rows' Q kept in each layer's saved tensor). MHA bf16 in 2 pieces with the rows as broadcasts a
    # root (host memory's choice), in 4 (the order whose returns cross what goes out: sockets' choice) likewise, the
    # partial out going back on rank 1's communicator beside rank 0's K/V on its own; GQA fp16 in 4 as send/recv.
    for coll, dtype, hkv, P in ((True, torch.bfloat16, 8, 2), (True, torch.bfloat16, 8, 4),
                                (False, torch.float16, 4, 4)) if n == 2 else ():
        ctx = tt.Context(scheme="allgather", collectives=coll, gather_pieces=P, root_comms=coll, move_queries=True)
        g = torch.Generator(device=dev).manual_seed(31)
        fulls = [[torch.randn(2, S, h, 128, generator=g, device=dev, dtype=dtype) for h in (8, hkv, hkv, 8)] for _ in range(2)]
        layers = two_layer_pass(ctx, fulls)
        info = ctx._rank_for(layers[0][0][0], layers[0][0][1], True, None, None).plan.info
        note = f"queries moved {info['queries_moved']}, collectives {info['collectives']}, one a root {info['root_comms']}"
        for i, (full, (mine, got)) in enumerate(zip(fulls, layers)):
            ok = judge(f"allgather queries moved in {P} {str(dtype)[6:]:8} B=2 H=8/{hkv} causal, layer {i}", got, full, True, None,
                       None, rank, note)
            bad += not (ok and info["queries_moved"] and info["collectives"] == coll)
        if rank == 0 and not info["queries_moved"]:
            print(f"FAIL allgather queries moved: the plan did not take the path meant ({note})", flush=True)

    # return_lse: this rank's softmax LSE rows [B, H, S_local] in shard order, against logsumexp of the scaled scores in
    # fp32 over the whole sequence (the same bf16 inputs); the compat functions' (out, softmax_lse, None).
    ctx = tt.Context(scheme="allgather")
    g = torch.Generator(device=dev).manual_seed(17)
    full = [torch.randn(1, S, h, 128, generator=g, device=dev, dtype=torch.bfloat16) for h in (8, 2, 2)]
    out, lse = tt.attention(*(ctx.shard(x, 1, causal=True).contiguous() for x in full), causal=True, ctx=ctx,
                            return_lse=True)
    qf, kf = full[0].float().transpose(1, 2), full[1].float().repeat_interleave(4, dim=2).transpose(1, 2)
    scores = (qf @ kf.transpose(-1, -2)) / 128 ** 0.5
    scores = scores.masked_fill(torch.ones(S, S, dtype=torch.bool, device=dev).triu(1), float("-inf"))
    ref_lse = torch.logsumexp(scores, dim=-1)  # [1, H, S]
    got_lse = ctx.unshard(lse, 2, causal=True)
    err = (got_lse - ref_lse).abs().max().item()
    c_out = compat.zigzag_ring_flash_attn_func(*(ctx.shard(x, 1, causal=True).contiguous() for x in full), causal=True,
                                               return_attn_probs=True)
    ok = err < 1e-2 and lse.shape == (1, 8, S // n) and not lse.requires_grad and len(c_out) == 3 and c_out[2] is None \
        and (ctx.unshard(c_out[1], 2, causal=True) - ref_lse).abs().max().item() < 1e-2
    bad += not ok
    if rank == 0:
        print(f"{'PASS' if ok else 'FAIL'} return_lse (and compat return_attn_probs): max |lse - logsumexp| {err:.1e}",
              flush=True)

    # Packed documents that change between calls of one shape (one rank re-masked per call, tasp_rank_documents): two
    # document sets' forwards, then their backwards in the other order, each against its own reference.
    ctx = tt.Context(scheme="auto", layout="contiguous")
    sets = ([0, 1000, 1001, 3500, S], [0, 700, 2900, S - 5, S])
    g = torch.Generator(device=dev).manual_seed(9)
    runs = []
    for cu in sets:
        full = [torch.randn(1, S, h, 128, generator=g, device=dev, dtype=torch.bfloat16) for h in (8, 2, 2, 8)]
        mine = [ctx.shard(x, 1, causal=True, cu_seqlens=cu).contiguous().requires_grad_() for x in full[:3]]
        out = tt.attention(*mine, causal=True, cu_seqlens=cu, ctx=ctx)
        runs.append((cu, full, mine, out))
    for cu, full, mine, out in reversed(runs):
        out.backward(ctx.shard(full[3], 1, causal=True, cu_seqlens=cu))
    for cu, full, mine, out in runs:
        got = [ctx.unshard(x, 1, causal=True, cu_seqlens=cu) for x in [out] + [m.grad for m in mine]]
        bad += not judge(f"documents re-masked per call, {len(cu) - 1} docs (of 2 sets, one plan)", got, full, True, None,
                         cu, rank)

    # The fabric measured by the ranks together (Context(measure_fabric=True)) before the first plan: every rank fits the
    # same profile, so every rank's plan is the same (scheme, pieces, prediction), and the attention is right.
    ctx = tt.Context(scheme="auto", measure_fabric=True)
    g = torch.Generator(device=dev).manual_seed(11)
    full = [torch.randn(2, S, h, 128, generator=g, device=dev, dtype=torch.bfloat16) for h in (8, 2, 2, 8)]
    mine, got = causal_pass(ctx, full)
    info = ctx._rank_for(mine[0], mine[1], True, None, None).plan.info
    said = [None] * n
    dist.all_gather_object(said, (info["scheme"], info["pieces_per_rank"], info["gather_steps"], info["predicted_us"],
                                  ctx.fabric["now_over_profile"]["median"]))
    agree = all(x == said[0] for x in said) and info["profile"].endswith("refitted to the fabric now")
    bad += not judge(f"measure_fabric=True: {ctx.fabric['steps']} steps in {ctx.fabric['seconds']:.1f} s, at "
                     f"{ctx.fabric['now_over_profile']['median']:.2f}x the profile's time; {n} ranks' plans the same "
                     f"({ctx.scheme_for(mine[0], mine[1], True)})", got, full, True, None, None, rank)
    bad += not agree
    if not agree and rank == 0:
        print(f"FAIL measure_fabric=True: the ranks' plans or profiles differ: {said}", flush=True)
    ctx.close()

    # torch.compile: the op stays one node (tasp::attention_fwd/bwd, tasp/torch/ops.py); the same numbers as eager up to
    # the order of the backward's fp32 reductions (dQ's bulk adds are unordered: 2.4e-6 apart on 2x H200, 2026-11-26),
    # far below bf16's 3.9e-3 step, so a wrong graph (a dropped or repeated op) still fails.
    ctx = tt.Context(scheme="auto")
    g = torch.Generator(device=dev).manual_seed(5)
    q, k, v, do = (ctx.shard(torch.randn(1, S, 8, 128, generator=g, device=dev, dtype=torch.bfloat16), 1, causal=True)
                   .contiguous().requires_grad_() for _ in range(4))
    f = torch.compile(lambda q, k, v: tt.attention(q, k, v, causal=True, ctx=ctx))
    outs = []
    for fn in (lambda q, k, v: tt.attention(q, k, v, causal=True, ctx=ctx), f):
        o = fn(q, k, v)
        o.backward(do)
        outs.append([o.detach().clone()] + [x.grad.clone() for x in (q, k, v)])
        q.grad = k.grad = v.grad = None
    errs = [rel(a, b) for a, b in zip(outs[1], outs[0])]
    ok = max(errs) < 1e-4
    bad += not ok
    if rank == 0:
        print(f"{'PASS' if ok else 'FAIL'} torch.compile against eager: out, dq, dk, dv {max(errs):.1e}", flush=True)
    # deterministic=True: dQ (and dK, dV) bit-identical between two runs of the same backward, and still right.
    ctx = tt.Context(scheme="auto", deterministic=True)
    g = torch.Generator(device=dev).manual_seed(7)
    full = [torch.randn(1, S, h, 128, generator=g, device=dev, dtype=torch.bfloat16) for h in (16, 4, 4, 16)]
    ref = reference(*full, True, None, None)
    runs = [causal_pass(ctx, full)[1] for _ in range(2)]
    same = all(torch.equal(a, b) for a, b in zip(*runs))
    errs = [rel(x, r) for x, r in zip(runs[0], ref)]
    ok = same and errs[0] < 1e-2 and max(errs[1:]) < 2e-2
    bad += not ok
    if rank == 0:
        print(f"{'PASS' if ok else 'FAIL'} deterministic=True: two runs {'bit-identical' if same else 'DIFFER'}; out "
              f"{errs[0]:.1e} dq {errs[1]:.1e} dk {errs[2]:.1e} dv {errs[3]:.1e}", flush=True)
    ctx.synchronize()
    # A group's handle destroyed before its ranks' (the C ABI allows either order; a garbage collector picks its own):
    # the rank still runs, right, on the group it holds, and goes cleanly after.
    from tasp._lib import lib
    lib.tasp_group_destroy(ctx._group.handle)
    ctx._group.handle = None
    errs = [rel(x, r) for x, r in zip(causal_pass(ctx, full)[1], ref)]
    ok = errs[0] < 1e-2 and max(errs[1:]) < 2e-2
    bad += not ok
    ctx.close()
    if rank == 0:
        print(f"{'PASS' if ok else 'FAIL'} a rank outlives its group's handle: out {errs[0]:.1e} dq {errs[1]:.1e} "
              f"dk {errs[2]:.1e} dv {errs[3]:.1e}", flush=True)
    dist.destroy_process_group()
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
