#!/usr/bin/env python3
"""Packed documents and sliding windows on one GPU with PyTorch (issue 14's baselines beside `tasp bench
kernel`): causal attention inside each document (optionally windowed), forward and forward+backward, through
torch.nn.attention.varlen.varlen_attn (FA2's varlen kernel, window_size=(W, 0)), and for documents without a
window SDPA per document (cuDNN and FA2 backends) beside it.
Usage: varlen_bench.py --docs 40000+8192+... [--window W] [--heads 32] [--dim 128] [--iters 5]"""
import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from sdpa_bench import median_ms  # tools/gpu/: the same timing (CUDA events, median)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", required=True)
    ap.add_argument("--window", type=int, default=-1, help="keys to the left a query sees (-1: all of its document)")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--iters", type=int, default=5)
    a = ap.parse_args()
    docs = [int(x) for x in a.docs.split("+")]
    S, H, D = sum(docs), a.heads, a.dim
    torch.manual_seed(0)
    q, k, v = (torch.randn(S, H, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    go = torch.randn(S, H, D, device="cuda", dtype=torch.bfloat16)
    W = a.window
    pairs = sum(d * (d + 1) / 2 if W < 0 or W >= d else (W + 1) * d - W * (W + 1) / 2 for d in docs)
    print(f"# torch {torch.__version__}, {torch.cuda.get_device_name()}, S={S} H={H} D={D}, {len(docs)} documents, window {W}")
    print("method,pass,ms,tflops")

    def report(name, fwd, both):
        for p, fn, f in (("fwd", fwd, 1.0), ("fwd+bwd", both, 3.5)):
            ms = median_ms(fn, a.iters, 2)
            print(f"{name},{p},{ms:.3f},{4 * H * D * pairs * f / ms / 1e9:.1f}")

    try:
        from torch.nn.attention.varlen import varlen_attn
        cu = torch.tensor([0] + list(torch.tensor(docs).cumsum(0)), device="cuda", dtype=torch.int32)
        mx = max(docs)
        run = lambda: varlen_attn(q, k, v, cu, cu, mx, mx, window_size=(W, 0))
        report("torch varlen_attn", lambda: run(), lambda: run().backward(go))
    except Exception as e:  # older or newer API: say so, keep going
        print(f"# torch.nn.attention.varlen unavailable: {type(e).__name__}: {e}")

    if W >= 0:
        return  # SDPA has no sliding window
    offs = [0]
    for d in docs:
        offs.append(offs[-1] + d)
    for name, be in (("sdpa cudnn per document", SDPBackend.CUDNN_ATTENTION), ("sdpa fa2 per document", SDPBackend.FLASH_ATTENTION)):
        def fwd():
            with sdpa_kernel(be):
                return [F.scaled_dot_product_attention(q[None, s:e].transpose(1, 2), k[None, s:e].transpose(1, 2),
                                                       v[None, s:e].transpose(1, 2), is_causal=True)
                        for s, e in zip(offs, offs[1:])]

        def both():
            outs = fwd()
            torch.autograd.backward([o for o in outs], [go[None, s:e].transpose(1, 2) for s, e in zip(offs, offs[1:])])

        try:
            report(name, fwd, both)
        except Exception as e:
            print(f"# {name}: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
