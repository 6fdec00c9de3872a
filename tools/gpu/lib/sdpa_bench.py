#!/usr/bin/env python3
"""PyTorch SDPA (cuDNN and FlashAttention-2 backends) forward and backward on one GPU, on the shapes that
`tasp bench kernel` takes, so both can be compared in the same run (lib/compare_kernels.py).

Runs only on GPU machines with PyTorch (never a build dependency). TFLOP/s count 4*B*H*S*S*D forward and
2.5x that backward, halved when causal (the FlashAttention convention, as tasp bench kernel).
GQA shapes (Hkv < H) give K/V with Hkv heads and enable_gqa=True; a backend that refuses it is reported as such.
Usage: sdpa_bench.py [--shape B=1,S=16384,H=32,D=128[,Hkv=8][,causal]]... [--iters 20] [--pass fwd] [--json out.json]
                     [--dtype bf16|fp16]
                     [--tasp "build-gpu/tools/tasp bench kernel" --tasp-json tasp.json] [--rounds 2] [--heat-ms 2000]
With --tasp, that command runs on each shape beside SDPA (shape by shape, round by round; first in even rounds,
last in odd ones), so that both kernels are timed at the same GPU warmth: a whole list of shapes run by one and
then by the other put the same shape minutes apart, and a cold H200 clocks higher than one that has run for a
minute. Every kernel is also kept busy --heat-ms before it is timed (tasp gets the same flag): `tasp bench kernel`
starts a process after a second of idle GPU, and timed cold it measured up to 13% above the same kernel timed hot
(docs/measurements/kernels.md, "how the kernels are timed"). 300 ms was not enough: the power limiter (700 W on an
H200) settles over about a second, so a kernel timed 300 ms after another one read what the other left behind
(tasp's D=128 causal backward 478 TFLOP/s after its forward, 518 alone, 515 after either with 2 s).
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

DEFAULT = ["B=1,S=16384,H=32,D=128", "B=1,S=16384,H=32,D=128,causal", "B=2,S=16384,H=16,D=64",
           "B=2,S=16384,H=16,D=64,causal"]


def parse(text):
    s = {"B": 1, "causal": False}
    for item in text.split(","):
        if item == "causal":
            s["causal"] = True
        elif item == "full":
            s["causal"] = False
        else:
            k, v = item.split("=")
            v = v.lower()
            s[k] = int(v[:-1]) * 1024 if v.endswith("k") else int(v)
    s.setdefault("Hkv", s["H"])
    return s


def median_ms(fn, iters, warmup, heat_ms=0.0):
    for _ in range(warmup):
        fn()
    if heat_ms > 0:  # busy until the clock settles, in batches of about 20 ms so the GPU never idles long
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        batch = max(1, int(20 / max(a.elapsed_time(b), 1e-3)))
        t0 = time.perf_counter()
        while (time.perf_counter() - t0) * 1e3 < heat_ms:
            for _ in range(batch):
                fn()
            torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def bench(s, backend, iters, warmup, passes="fwd+bwd", heat_ms=0.0, dtype=torch.bfloat16):
    B, S, H, Hkv, D = s["B"], s["S"], s["H"], s["Hkv"], s["D"]
    gen = torch.Generator(device="cuda").manual_seed(1)
    mk = lambda h: torch.randn(B, h, S, D, device="cuda", dtype=dtype, generator=gen).requires_grad_()
    q, k, v = mk(H), mk(Hkv), mk(Hkv)
    dout = torch.randn(B, H, S, D, device="cuda", dtype=dtype, generator=gen)
    gqa = Hkv != H
    with sdpa_kernel([backend]):
        fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=s["causal"], enable_gqa=gqa)
        out = fwd()
        fwd_ms = median_ms(fwd, iters, warmup, heat_ms)
        bwd = lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
        bwd_ms = median_ms(bwd, iters, warmup, heat_ms) if "bwd" in passes else float("nan")
    flops = 4.0 * B * H * S * S * D * (0.5 if s["causal"] else 1.0)
    return fwd_ms, bwd_ms, flops / fwd_ms / 1e9, 2.5 * flops / bwd_ms / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", action="append", help="B=..,S=..,H=..,D=..[,Hkv=..][,causal] (repeatable)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--json", help="write the rows as JSON here")
    ap.add_argument("--pass", dest="passes", default="fwd+bwd", choices=["fwd", "fwd+bwd"],
                    help="fwd: time the forward only (bwd columns NaN)")
    ap.add_argument("--tasp", help="a `tasp bench kernel` command line to run on each shape just before SDPA")
    ap.add_argument("--tasp-json", help="write the --tasp command's rows (all rounds) as JSON here")
    ap.add_argument("--rounds", type=int, default=1, help="times over the whole list of shapes")
    ap.add_argument("--heat-ms", type=float, default=2000, help="each kernel kept busy this long before it is timed")
    ap.add_argument("--backends", default="cudnn,fa2", help="SDPA backends to time, comma-separated (cudnn, fa2)")
    # fp16 beside bf16 on the same kernels: at the power limit fp16 settles at a lower clock (kernels.md), for cuDNN as
    # for tasp if the operands decide it, which only both measured in one run can say.
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"], help="input type of both (tasp gets --dtype)")
    a = ap.parse_args()
    rows, tasp_rows = [], []
    print(f"# sdpa_bench: {torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"{a.dtype}, median of {a.iters}")
    print(f"# {'shape':34} {'backend':8} {'fwd ms':>9} {'bwd ms':>9} {'fwd TF/s':>9} {'bwd TF/s':>9}")
    for rnd, text in ((r, t) for r in range(a.rounds) for t in a.shape or DEFAULT):
        s = parse(text)
        def run_tasp():
            fd, path = tempfile.mkstemp(suffix=".json")
            os.close(fd)
            cmd = shlex.split(a.tasp) + ["--pass", a.passes, "--shape", text, "--json", path, "--heat-ms", str(a.heat_ms),
                                          "--dtype", a.dtype]
            res = subprocess.run(cmd, capture_output=True, text=True)
            got = json.load(open(path)) if res.returncode == 0 and os.path.getsize(path) else []
            os.unlink(path)
            if not got:
                print(f"  {text:34} tasp     failed: {(res.stderr or res.stdout).strip().splitlines()[-1:]}")
            for t in got:
                t["round"] = rnd
                tasp_rows.append(t)
                print(f"  {text:34} tasp {t['pass']:3} {t['ms']:9.3f} {'':9} {t['tflops']:9.1f}", flush=True)
        if a.tasp and rnd % 2 == 0:
            run_tasp()
        for name, be in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("fa2", SDPBackend.FLASH_ATTENTION)):
            if name not in a.backends.split(","):
                continue
            try:
                fm, bm, ft, bt = bench(s, be, a.iters, a.warmup, a.passes, a.heat_ms,
                                       torch.float16 if a.dtype == "fp16" else torch.bfloat16)
            except Exception as e:  # a backend that refuses the shape
                print(f"  {text:34} {name:8} unsupported: {str(e).splitlines()[0][:80]}")
                rows.append({"shape": text, "backend": name, "error": str(e).splitlines()[0]})
                continue
            print(f"  {text:34} {name:8} {fm:9.3f} {bm:9.3f} {ft:9.1f} {bt:9.1f}", flush=True)
            rows.append({"shape": text, "backend": name, "fwd_ms": fm, "bwd_ms": bm, "fwd_tflops": ft, "bwd_tflops": bt,
                         "round": rnd})
            torch.cuda.empty_cache()
        if a.tasp and rnd % 2 == 1:
            run_tasp()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    if a.tasp_json:
        with open(a.tasp_json, "w") as f:
            json.dump(tasp_rows, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
