"""A small Llama-style decoder (RMSNorm, RoPE, GQA attention, SwiGLU) trained on random tokens made here (nothing is
downloaded), either sequence-parallel over N GPUs with tasp or on one device with PyTorch's SDPA, from the same seed
and data, so that the two loss curves can be compared step by step.

  torchrun --nproc_per_node=2 examples/train_tiny_llama.py --mode tasp --json tasp.json
  python examples/train_tiny_llama.py --mode sdpa --json sdpa.json
  python examples/train_tiny_llama.py --compare tasp.json sdpa.json     # the largest relative loss difference
  ... --docs 8                                            # packed documents, cut anew every step (B=1)

Sequence parallel: every rank holds its shard of each sequence's tokens (tasp.torch.Context.shard: zigzag chunks
under the causal mask), with their global positions for RoPE; embeddings, norms and MLPs are per token; attention is
tasp.torch.attention over the process group; each rank's loss is its tokens' share of the global mean, and the
gradients are summed over the ranks before the optimizer step, so every rank's weights stay the one-device weights.
With --docs N each step's sequence is N documents packed (cut at random, the same cuts in both modes): attention stays
inside each (tasp: cu_seqlens, one plan for every step's documents under the zigzag order; one device: SDPA document
by document) and RoPE positions restart at each. Master weights in fp32, matmuls under bf16 autocast; AdamW."""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

    def forward(self, x):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


def rope(x, pos, base=10000.0):
    """Rotary embedding of x [B, S, heads, D] at global token positions pos [S]."""
    D = x.shape[-1]
    inv = 1.0 / base ** (torch.arange(0, D, 2, device=x.device, dtype=torch.float32) / D)
    ang = pos.float()[:, None] * inv[None, :]  # [S, D/2]
    cos, sin = ang.cos()[None, :, None, :], ang.sin()[None, :, None, :]
    x1, x2 = x.float()[..., 0::2], x.float()[..., 1::2]
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)
    return out.to(x.dtype)


class Attention(nn.Module):
    def __init__(self, dim, heads, kv_heads, attend):
        super().__init__()
        self.h, self.hkv, self.d = heads, kv_heads, dim // heads
        self.wq = nn.Linear(dim, heads * self.d, bias=False)
        self.wkv = nn.Linear(dim, 2 * kv_heads * self.d, bias=False)
        self.wo = nn.Linear(heads * self.d, dim, bias=False)
        self.attend = attend  # (q, k, v) [B, S, heads, D] -> [B, S, H, D], causal

    def forward(self, x, pos):
        B, S, _ = x.shape
        q = self.wq(x).view(B, S, self.h, self.d)
        k, v = self.wkv(x).view(B, S, 2, self.hkv, self.d).unbind(2)
        o = self.attend(rope(q, pos), rope(k, pos), v)
        return self.wo(o.reshape(B, S, -1))


class Block(nn.Module):
    def __init__(self, dim, heads, kv_heads, hidden, attend):
        super().__init__()
        self.n1, self.n2 = RMSNorm(dim), RMSNorm(dim)
        self.attn = Attention(dim, heads, kv_heads, attend)
        self.w13 = nn.Linear(dim, 2 * hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x, pos):
        x = x + self.attn(self.n1(x), pos)
        gate, up = self.w13(self.n2(x)).chunk(2, dim=-1)
        return x + self.w2(F.silu(gate) * up)


class TinyLlama(nn.Module):
    def __init__(self, vocab, dim, layers, heads, kv_heads, hidden, attend):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, kv_heads, hidden, attend) for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.out = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens, pos):
        x = self.emb(tokens)
        for b in self.blocks:
            x = b(x, pos)
        return self.out(self.norm(x))


def sdpa_attend(q, k, v, cu=None):
    """One device: PyTorch's SDPA over the whole sequence (GQA by enable_gqa), or document by document (cu: the
    packed documents' offsets)."""
    def one(q, k, v):
        return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True,
                                              enable_gqa=k.shape[2] != q.shape[2]).transpose(1, 2)
    if cu is None:
        return one(q, k, v)
    return torch.cat([one(q[:, a:b], k[:, a:b], v[:, a:b]) for a, b in zip(cu, cu[1:])], 1)


def documents(seq, n, gen):
    """n documents packed into seq tokens, cut at random: their offsets [0, ..., seq] and each token's position in its
    document."""
    cuts = sorted((torch.randperm(seq - 1, generator=gen)[:n - 1] + 1).tolist())
    cu = [0] + cuts + [seq]
    pos = torch.cat([torch.arange(b - a) for a, b in zip(cu, cu[1:])])
    return cu, pos


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=("tasp", "sdpa"), default="tasp")
    ap.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"), help="compare two runs' losses and exit")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--seq", type=int, default=16384, help="tokens per sequence (the whole sequence)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scheme", default="auto", help="tasp's scheme (--mode tasp)")
    ap.add_argument("--device", default="cuda", help="--mode sdpa: cuda or cpu (a quick check without GPUs)")
    ap.add_argument("--docs", type=int, default=0,
                    help="packed documents per step (B=1): the sequence cut at random into this many every step")
    ap.add_argument("--json", help="write the losses and tokens/s as JSON here (not --log: torchrun takes a --log prefix as its own)")
    a = ap.parse_args(argv)
    if a.docs and (a.batch != 1 or not 1 < a.docs < a.seq):
        ap.error(f"--docs: packed documents need --batch 1 and 1 < docs < --seq, got --docs {a.docs} --batch {a.batch}")
    return a


def compare(a_path, b_path):
    a, b = (json.load(open(p)) for p in (a_path, b_path))
    worst = max(abs(x - y) / abs(y) for x, y in zip(a["loss"], b["loss"]))
    print(f"{len(a['loss'])} steps: largest relative loss difference {worst:.2e}; tokens/s {a['tokens_per_s']:.0f} "
          f"({a['mode']}, {a['ranks']} ranks) vs {b['tokens_per_s']:.0f} ({b['mode']}, {b['ranks']} ranks)")
    return 0 if worst <= 0.01 else 1


def main(argv=None):
    a = parse_args(argv)
    if a.compare:
        return compare(*a.compare)
    rank, n, ctx = 0, 1, None
    if a.mode == "tasp":
        import torch.distributed as dist

        import tasp.torch as tt
        dist.init_process_group("nccl")
        rank, n = dist.get_rank(), dist.get_world_size()
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
        dev = torch.device("cuda", torch.cuda.current_device())
        # Documents: a token order that ignores them (zigzag), so every step's documents share one plan and rank.
        ctx = tt.Context(scheme=a.scheme, layout="zigzag" if a.docs else None)
        attend = lambda q, k, v: tt.attention(q, k, v, causal=True, cu_seqlens=cur["cu"], ctx=ctx)  # noqa: E731
    else:
        dev = torch.device(a.device)
        attend = lambda q, k, v: sdpa_attend(q, k, v, cur["cu"])  # noqa: E731
    cur = {"cu": None}  # this step's documents (--docs)
    torch.manual_seed(a.seed)  # the same initial weights on every rank and in both modes
    model = TinyLlama(a.vocab, a.dim, a.layers, a.heads, a.kv_heads, 4 * a.dim * 2 // 3 // 64 * 64, attend).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.0)
    data = torch.Generator().manual_seed(a.seed + 1)
    amp = torch.autocast(device_type=dev.type, dtype=torch.bfloat16)
    losses, tokens, t0 = [], 0, None
    for step in range(a.steps):
        seq = torch.randint(0, a.vocab, (a.batch, a.seq + 1), generator=data)
        inputs, targets, pos = seq[:, :-1], seq[:, 1:], torch.arange(a.seq)
        if a.docs:
            cur["cu"], pos = documents(a.seq, a.docs, data)
        if ctx is not None:  # this rank's tokens, their targets and positions, in the plan's order
            inputs, targets = (ctx.shard(x, 1, causal=True, cu_seqlens=cur["cu"]) for x in (inputs, targets))
            pos = ctx.shard(pos, 0, causal=True, cu_seqlens=cur["cu"])
        inputs, targets, pos = inputs.to(dev), targets.to(dev), pos.to(dev)
        with amp:
            logits = model(inputs.contiguous(), pos.contiguous())
        # This rank's share of the global mean loss; the ranks' gradients summed below make the whole batch's.
        loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), reduction="sum") / (a.batch * a.seq)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        total = loss.detach().clone()
        if ctx is not None:
            import torch.distributed as dist
            for p in model.parameters():
                dist.all_reduce(p.grad)
            dist.all_reduce(total)
        opt.step()
        losses.append(total.item())
        if step == 1:  # tokens/s from the third step on (the first two build plans and warm up)
            torch.cuda.synchronize() if dev.type == "cuda" else None
            t0, tokens = time.perf_counter(), 0
        elif t0 is not None:
            tokens += a.batch * a.seq
        if rank == 0:
            print(f"step {step:3d}  loss {losses[-1]:.5f}", flush=True)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    rate = tokens / (time.perf_counter() - t0) if t0 and tokens else 0.0
    if rank == 0:
        print(f"{a.mode}: {n} rank(s), {rate:.0f} tokens/s")
        if a.json:
            json.dump({"mode": a.mode, "ranks": n, "loss": losses, "tokens_per_s": rate, "args": vars(a)},
                      open(a.json, "w"), indent=1)
    if ctx is not None:
        ctx.synchronize()
        import torch.distributed as dist
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
