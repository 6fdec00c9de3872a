#!/usr/bin/env python3
"""The PyTorch baselines beside tasp on the same GPUs (tools/gpu/compare.sh, check.sh): ring / zigzag ring, Ulysses and
all-gather on PyTorch's cuDNN or FA2 kernels, every local GPU a rank (python/tasp/torch/baselines.py says what each
algorithm does; `python -m tasp.bench --baseline` runs the same). Prints one line per workload, kernel and
algorithm: forward ms and forward+backward ms (median over iterations of the slowest rank), and with --check the
relative errors of out, dq, dk, dv against one-GPU autograd on the whole sequence. Runs only on GPU machines with
PyTorch (never a build dependency).
Usage: torch_ring.py -w B=1,S=16384,H=32,Hkv=8,D=128[,causal] [-w ...] [--kernel cudnn,fa2]
       [--algo ring,ulysses,allgather] [--iters 5] [--check] [--csv out.csv]   (ranks = the visible GPUs)
"""
import argparse
import importlib.util
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from spawn_ranks import spawn_ranks

# The algorithms' module by its path: importing the tasp package would load its C library, which these runs need not.
_spec = importlib.util.spec_from_file_location(
    "tasp_baselines", Path(__file__).resolve().parents[3] / "python" / "tasp" / "torch" / "baselines.py")
_baselines = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_baselines)
baseline, median_ms, name_of, splits, unshard = (_baselines.baseline, _baselines.median_ms, _baselines.name_of,
                                                 _baselines.splits, _baselines.unshard)


def parse(text):
    s = {"B": 1, "causal": False}
    for item in text.split(","):
        if item in ("causal", "full"):
            s["causal"] = item == "causal"
        else:
            k, v = item.split("=")
            v = v.lower()
            s[k] = int(v[:-1]) * 1024 if v.endswith("k") else int(v)
    s.setdefault("Hkv", s.get("H", 1))
    return s


def worker(rank, n, args, port):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=n, device_id=torch.device("cuda", rank))
    for text in args.workload:
        w = parse(text)
        B, S, H, Hkv, D, causal = w["B"], w["S"], w["H"], w["Hkv"], w["D"], w["causal"]
        gen = torch.Generator(device="cuda").manual_seed(7)
        full = [torch.randn(B, h, S, D, device="cuda", dtype=torch.bfloat16, generator=gen) for h in (H, Hkv, Hkv, H)]
        for kernel, algo in ((kn, al) for al in args.algo.split(",") for kn in args.kernel.split(",")):
            uly = algo == "ulysses"
            res = {"workload": text, "kernel": kernel, "algo": name_of(algo, causal), "ranks": n}
            try:
                why = splits(algo, H, Hkv, n)
                if why:
                    raise ValueError(why)
                fwd, fwd_bwd = baseline(algo, kernel, full, causal, rank, n)
                res["fwd_ms"] = median_ms(fwd, args.warmup, args.iters, args.heat_ms)
                res["fwd_bwd_ms"] = median_ms(fwd_bwd, args.warmup, args.iters, args.heat_ms)
                if args.check:
                    o, (dq, dk, dv) = fwd_bwd()
                    got = []
                    for x in (o.float(), dq, dk, dv):
                        parts = [torch.empty_like(x) for _ in range(n)]
                        dist.all_gather(parts, x.contiguous())
                        got.append(unshard(parts, n, causal and not uly))
                    if rank == 0:
                        qf, kf, vf = (x.detach().clone().requires_grad_() for x in full[:3])
                        ref = F.scaled_dot_product_attention(qf, kf, vf, is_causal=causal, enable_gqa=Hkv != H)
                        ref.backward(full[3])
                        for name, x, r in zip(("out", "dq", "dk", "dv"), got, (ref, qf.grad, kf.grad, vf.grad)):
                            r = r.float()
                            res["err_" + name] = ((x - r).norm() / r.norm()).item()
            except Exception as e:  # a kernel that refuses the shape
                res["error"] = str(e).splitlines()[0][:120]
            if rank == 0 and args.csv and "error" not in res:  # row by row: a run cut short keeps what it measured
                with open(args.csv, "a") as f:
                    f.write(f"\"{text}\",{kernel},{res['algo']},{res['fwd_ms']},{res['fwd_bwd_ms']},{n}\n")
            if rank == 0:
                errs = " ".join(f"{k[4:]} {v:.1e}" for k, v in res.items() if k.startswith("err_"))
                if "error" in res:
                    print(f"  {text:32} {kernel:6} error: {res['error']}", flush=True)
                else:
                    print(f"  {text:32} {kernel:6} {res['algo']:7} fwd {res['fwd_ms']:9.3f} ms  fwd+bwd "
                          f"{res['fwd_bwd_ms']:9.3f} ms  {errs}", flush=True)
            torch.cuda.empty_cache()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-w", "--workload", action="append", required=True)
    ap.add_argument("--kernel", default="cudnn,fa2")
    ap.add_argument("--algo", default="ring", help="ring (zigzag ring when causal), ulysses, allgather; comma-separated")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--heat-ms", type=float, default=0, help="untimed calls for at least this long before each is timed")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--csv")
    a = ap.parse_args()
    n = torch.cuda.device_count()
    for text in a.workload:
        w = parse(text)
        if w["S"] % (2 * n if w["causal"] else n):
            sys.exit(f"{text}: S must split into {2 * n if w['causal'] else n} equal chunks")
    print(f"# torch_ring: {n} x {torch.cuda.get_device_name()}, torch {torch.__version__}, bf16, median of {a.iters}, "
          f"slowest rank")
    if a.csv:
        with open(a.csv, "w") as f:
            f.write("config,kernel,algo,fwd_ms,fwd_bwd_ms,ranks\n")
    spawn_ranks(worker, n, n, a)


if __name__ == "__main__":
    main()
