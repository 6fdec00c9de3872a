"""The ring-attention benchmark people already run, through tasp (`tasp.torch.attention`), with the PyTorch
baselines beside it in the same run. The interface of nnscaler's benchmark_ring_attn.py (and, with --varlen, its
benchmark_ring_attn_varlen.py):

  python -m tasp.bench --list-configs
  torchrun --nproc_per_node=2 -m tasp.bench --config medium [--baseline]
  torchrun --nproc_per_node=2 -m tasp.bench --seqlen 8192 --nheads 16 --head-dim 128 --batch-size 4 --causal
  torchrun --nproc_per_node=2 -m tasp.bench --config medium --varlen

Prints, per implementation, forward, backward and forward+backward ms (median of the slowest rank), tokens/s, peak
GPU memory, and the speedup over one GPU (SDPA on cuDNN over the whole sequence) with its parallel efficiency;
with --baseline also ring-flash-attention's ring / zigzag ring, DeepSpeed-Ulysses and llama3-style all-gather on
PyTorch's cuDNN kernels (tasp.torch.baselines) and tasp's ratio to the best of them. --json writes the same."""
import argparse
import json
import os
import sys

import tasp

TIMING_METHODS = ("simple", "warmup", "profiler")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tasp.bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", help="a named configuration (--list-configs)")
    ap.add_argument("--list-configs", action="store_true", help="list the named configurations and exit")
    ap.add_argument("--seqlen", type=int, help="tokens of the whole sequence (overrides the config's)")
    ap.add_argument("--nheads", type=int, help="query heads")
    ap.add_argument("--nheads-kv", type=int, help="K/V heads (GQA/MQA; default --nheads)")
    ap.add_argument("--head-dim", type=int, help="head dim")
    ap.add_argument("--batch-size", type=int, help="sequences")
    mask = ap.add_mutually_exclusive_group()
    mask.add_argument("--causal", dest="causal", action="store_true", default=None, help="causal mask")
    mask.add_argument("--full", dest="causal", action="store_false", help="no mask")
    ap.add_argument("--window", help="sliding window L:R as flash-attn's window_size (-1 unbounded)")
    ap.add_argument("--varlen", action="store_true",
                    help="packed documents, as nnscaler's varlen benchmark: the B sequences of S tokens as one of B*S "
                         "tokens, each cut into documents at 0, S/8, S/4, S/2 (cu_seqlens); the PyTorch baselines have "
                         "no documents and are left out, one GPU runs SDPA document by document")
    ap.add_argument("--cu-seqlens", help="packed documents' offsets 0,...,T of one sequence of T tokens (as --varlen, "
                                         "with these documents; T replaces B*S)")
    ap.add_argument("--dtype", choices=("bf16", "fp16"), help="input type (default the config's, else bf16)")
    ap.add_argument("--scheme", default="auto", help="tasp's scheme: auto, ring, zigzag, allgather, hamilton, ulysses, usp")
    ap.add_argument("--profile", help="the simulator's machine profile for tasp's choices (tasp calibrate --measure on "
                                      "this fabric; default the built-in one for the topology)")
    ap.add_argument("--measure-fabric", action="store_true",
                    help="time the fabric's NCCL steps on tasp's communicator first (every rank together; 1 s on NVLink, "
                         "9-20 s over loopback sockets) and make tasp's choices and prediction with --profile (or the "
                         "topology's) refitted to them; Context(measure_fabric=True)")
    ap.add_argument("--collectives", choices=("false", "true", "auto"), default="auto",
                    help="allgather's gathers and reduce-scatters as NCCL collectives (true), grouped send/recv "
                         "(false), or whichever --profile times faster (auto, default); Context(collectives=...)")
    ap.add_argument("--root-comms", choices=("false", "true", "auto"), default="auto",
                    help="those collectives as one broadcast or reduce a rank, each on a NCCL communicator of its own "
                         "(true), one all-gather or reduce-scatter (false), or as --profile measured them (auto, "
                         "default); Context(root_comms=...)")
    ap.add_argument("--prune-plain", choices=("false", "true", "auto"), default="auto",
                    help="allgather pruned for a plain causal mask, its pieces cut by chunk so that a rank's late chunk "
                         "stays home (true), never (false), or where --profile simulates it faster (auto, default: "
                         "through host memory's profile, the MHA configurations); Context(prune_plain=...)")
    ap.add_argument("--move-queries", choices=("false", "true", "auto"), default="auto",
                    help="on 2 ranks under a plain causal mask, rank 0's late chunk's queries computed at rank 1 (true), "
                         "never (false), or where --profile simulates it faster (auto, default: the 2x H200 host-memory "
                         "and socket profiles, the MHA configurations); Context(move_queries=...)")
    ap.add_argument("--timing-method", choices=TIMING_METHODS, default="warmup",
                    help="simple: timed runs alone, each from an idle GPU (the host's launch latency counted); "
                         "warmup (default): warm-up runs and --heat-ms first, then the timed runs back to back with "
                         "an event pair around each, as a training step runs them (the host ahead of the GPU); "
                         "profiler: warmup's, then one torch.profiler pass whose table rank 0 prints")
    ap.add_argument("--warmup-runs", type=int, default=3, help="untimed runs first (default 3)")
    ap.add_argument("--timing-runs", type=int, default=10, help="timed runs, the median reported (default 10)")
    ap.add_argument("--heat-ms", type=float, default=2000,
                    help="warmup: run for at least this long before timing (the power limiter settles over ~1 s)")
    ap.add_argument("--baseline", action="store_true", help="the PyTorch baselines in the same run, and the ratios")
    ap.add_argument("--no-single", action="store_true", help="skip the one-GPU run (speedup, parallel efficiency)")
    ap.add_argument("--json", help="write the results here (rank 0)")
    a = ap.parse_args(argv)
    for name in ("seqlen", "nheads", "nheads_kv", "head_dim", "batch_size", "warmup_runs", "timing_runs"):
        v = getattr(a, name)
        if v is not None and v < (0 if name == "warmup_runs" else 1):
            ap.error(f"--{name.replace('_', '-')}: expected a positive number, got {v}")
    return a


def shape_of(a):
    """(B, S, H, Hkv, D, causal, window, dtype) from the config and the overrides; ValueError naming what is wrong."""
    base = {"B": 4, "S": 8192, "H": 16, "Hkv": None, "D": 128, "causal": False, "window_left": -1, "window_right": -1,
            "dtype": "bf16"}
    if a.config:
        found = {c["name"]: c for c in tasp.configs()}
        if a.config not in found:
            raise ValueError(f"--config: no configuration named {a.config!r} (--list-configs lists them)")
        base.update(found[a.config])
    elif not (a.seqlen and a.nheads and a.head_dim):
        raise ValueError("--config NAME, or --seqlen, --nheads and --head-dim (with --batch-size, --causal, ...)")
    B = a.batch_size or base["B"]
    S = a.seqlen or base["S"]
    H = a.nheads or base["H"]
    Hkv = a.nheads_kv or (base["Hkv"] if base["Hkv"] and not a.nheads else H)
    D = a.head_dim or base["D"]
    causal = base["causal"] if a.causal is None else a.causal
    window = None
    if a.window:
        try:
            window = tuple(int(x) for x in a.window.split(":"))
            assert len(window) == 2
        except (ValueError, AssertionError):
            raise ValueError(f"--window: expected L:R, got {a.window!r}") from None
    elif base["window_left"] >= 0 or base["window_right"] >= 0:
        window = (base["window_left"], base["window_right"])
    if H % Hkv:
        raise ValueError(f"--nheads-kv: {Hkv} does not divide --nheads {H}")
    return B, S, H, Hkv, D, causal, window, a.dtype or base["dtype"]


def documents_of(a, B, S):
    """(B, S, cu_seqlens) the run uses: with --varlen or --cu-seqlens one packed sequence and its documents' offsets
    (a tuple), else (B, S, None); ValueError naming the argument."""
    if a.cu_seqlens:
        try:
            cu = [int(x) for x in a.cu_seqlens.split(",")]
        except ValueError:
            raise ValueError(f"--cu-seqlens: expected offsets 0,...,T, got {a.cu_seqlens!r}") from None
        if len(cu) < 2 or cu[0] != 0 or any(y <= x for x, y in zip(cu, cu[1:])):
            raise ValueError(f"--cu-seqlens: expected increasing offsets from 0, got {a.cu_seqlens!r}")
        return 1, cu[-1], tuple(cu)
    if a.varlen:
        cuts = sorted({0, S // 8, S // 4, S // 2})
        return 1, B * S, tuple(b * S + x for b in range(B) for x in cuts) + (B * S,)
    return B, S, None


def run_environment(env=None):
    """What a result depends on beyond its shape: the fabric NCCL was forced onto (as tools/gpu/lib/common.sh forces it:
    "socket" with NCCL_P2P_DISABLE and NCCL_SHM_DISABLE, "shm" with NCCL_P2P_DISABLE alone, else "default") and every
    NCCL_* and TASP_* variable set, so that a report says which fabric and which switches it measured."""
    env = os.environ if env is None else env
    on = lambda k: env.get(k, "0") not in ("", "0")
    fabric = "socket" if on("NCCL_P2P_DISABLE") and on("NCCL_SHM_DISABLE") else "shm" if on("NCCL_P2P_DISABLE") else "default"
    return {"fabric": fabric, "variables": {k: env[k] for k in sorted(env) if k.startswith(("NCCL_", "TASP_"))}}


def list_configs():
    print(f"{'name':20} {'group':16} {'B':>3} {'S':>7} {'H':>4} {'Hkv':>4} {'D':>4} {'mask':>7} {'dtype':>5}  tokens")
    for c in tasp.configs():
        print(f"{c['name']:20} {c['group']:16} {c['B']:3d} {c['S']:7d} {c['H']:4d} {c['Hkv']:4d} {c['D']:4d} "
              f"{'causal' if c['causal'] else 'full':>7} {c['dtype']:>5}  {c['B'] * c['S'] // 1024}K")


def run(a):
    import torch
    import torch.distributed as dist

    import tasp.torch as tt
    from tasp.torch import baselines as bl

    B, S, H, Hkv, D, causal, window, dtype_name = shape_of(a)
    B, S, cu = documents_of(a, B, S)
    dist.init_process_group("nccl")
    rank, n = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dev = torch.device("cuda", torch.cuda.current_device())
    dtype = torch.bfloat16 if dtype_name == "bf16" else torch.float16
    say = print if rank == 0 else (lambda *x, **k: None)
    say(f"# tasp.bench: {n} x {torch.cuda.get_device_name()}, torch {torch.__version__}; B={B} S={S} H={H} Hkv={Hkv} "
        f"D={D} {'causal' if causal else 'full'}{f' window={window}' if window else ''}"
        f"{f' {len(cu) - 1} documents' if cu else ''} {dtype_name}; "
        f"{a.timing_method}, median of {a.timing_runs} (slowest rank)")
    g = torch.Generator(device=dev).manual_seed(1234)
    full = [torch.randn(B, S, h, D, generator=g, device=dev, dtype=dtype) for h in (H, Hkv, Hkv, H)]  # q, k, v, dO

    def timed(fn):
        """fn's median ms over --timing-runs, each the slowest rank's; warm-up and heat by --timing-method."""
        warm = 0 if a.timing_method == "simple" else a.warmup_runs
        heat = 0 if a.timing_method == "simple" else a.heat_ms
        ms = bl.median_ms(fn, warm, a.timing_runs, heat, back_to_back=a.timing_method != "simple")
        if a.timing_method == "profiler":
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                fn()
                torch.cuda.synchronize()
            say(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12))
        return ms

    rows = []

    def record(name, fwd, fwd_bwd):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        free0, total = torch.cuda.mem_get_info()
        f, fb = timed(fwd), timed(fwd_bwd)
        free1, _ = torch.cuda.mem_get_info()
        peak = torch.tensor([torch.cuda.max_memory_allocated() / 2**30, (total - min(free0, free1)) / 2**30], device=dev)
        dist.all_reduce(peak, op=dist.ReduceOp.MAX)
        rows.append({"name": name, "fwd_ms": f, "bwd_ms": fb - f, "fwd_bwd_ms": fb, "tokens_per_s": B * S / (fb / 1e3),
                     "torch_peak_gib": peak[0].item(), "device_used_gib": peak[1].item()})
        say(f"  {name:28} fwd {f:9.3f} ms  bwd {fb - f:9.3f} ms  fwd+bwd {fb:9.3f} ms  {B * S / (fb / 1e3):12.0f} tok/s  "
            f"peak {peak[0].item():6.2f} GiB (device {peak[1].item():6.2f})", flush=True)

    # tasp: this rank's shard in the plan's order, autograd through tasp's backward.
    ctx = tt.Context(scheme=a.scheme, profile=a.profile,
                     collectives={"false": False, "true": True, "auto": "auto"}[a.collectives],
                     root_comms={"false": False, "true": True, "auto": None}[a.root_comms],
                     prune_plain={"false": False, "true": True, "auto": None}[a.prune_plain],
                     move_queries={"false": False, "true": True, "auto": None}[a.move_queries],
                     measure_fabric=a.measure_fabric)
    q, k, v, do = (ctx.shard(x, 1, causal=causal, cu_seqlens=cu).contiguous() for x in full)
    q.requires_grad_(), k.requires_grad_(), v.requires_grad_()

    def tasp_fwd():
        with torch.no_grad():
            return tt.attention(q, k, v, causal=causal, window=window, cu_seqlens=cu, ctx=ctx)

    def tasp_fwd_bwd():
        out = tt.attention(q, k, v, causal=causal, window=window, cu_seqlens=cu, ctx=ctx)
        out.backward(do)
        q.grad = k.grad = v.grad = None

    scheme = ctx.scheme_for(q, k, causal, window, cu)
    if ctx.fabric:
        f = ctx.fabric["now_over_profile"]
        say(f"# tasp: fabric measured in {ctx.fabric['seconds']:.1f} s: {ctx.fabric['profile']} (its steps of 16 MiB "
            f"and more at {f['median']:.2f}x the time the profile gives them, median; {f['min']:.2f}-{f['max']:.2f}x)")
    say(f"# tasp: {scheme}")
    record(f"tasp {scheme.split(' ')[0]}", tasp_fwd, tasp_fwd_bwd)
    # The simulator's fwd+bwd for the plan, the rank's copies to and from PyTorch's tensors included.
    predicted = ctx._rank_for(q, k, causal, window, cu).plan.info["predicted_us"] / 1e3
    rows[0]["predicted_ms"] = predicted
    say(f"  {'predicted (tasp simulate)':28} fwd+bwd {predicted:9.3f} ms: measured / predicted "
        f"{rows[0]['fwd_bwd_ms'] / predicted:.3f}")
    rows[0]["tasp_buffers_gib"] = ctx.device_bytes() / 2**30  # outside PyTorch's allocator
    say(f"  {'tasp buffers (own)':28} {rows[0]['tasp_buffers_gib']:.2f} GiB per rank beside PyTorch's peak")

    if a.baseline:
        if window or cu:
            say("# baselines: no windowed or packed-document ring/Ulysses/all-gather in tasp.torch.baselines; skipped")
        else:
            heads = [x.transpose(1, 2).contiguous() for x in full]  # the kernels' [B, heads, S, D]
            for algo in bl.ALGOS:
                why = bl.splits(algo, H, Hkv, n)
                if why:
                    say(f"  {bl.name_of(algo, causal)}: {why}")
                    continue
                fwd, fwd_bwd = bl.baseline(algo, "cudnn", heads, causal, rank, n)
                record(f"torch {bl.name_of(algo, causal)} (cudnn)", fwd, fwd_bwd)
            del heads

    single = None
    if not a.no_single:
        # One GPU, the whole sequence: SDPA on cuDNN (window: the math mask on one GPU is not the field's best; skip).
        if window:
            say("# one GPU: skipped under a window")
        else:
            qs, ks, vs, ds = (x.transpose(1, 2) for x in full)
            qs, ks, vs = (x.detach().requires_grad_() for x in (qs, ks, vs))
            gq = H // Hkv

            def sdpa():
                f = torch.nn.functional.scaled_dot_product_attention
                if cu is None:
                    return f(qs, ks, vs, is_causal=causal, enable_gqa=gq > 1)
                # Packed documents: one call per document (what a user without varlen kernels runs).
                return torch.cat([f(qs[:, :, x:y], ks[:, :, x:y], vs[:, :, x:y], is_causal=causal, enable_gqa=gq > 1)
                                  for x, y in zip(cu, cu[1:])], 2)

            def one_fwd():
                with torch.no_grad():
                    sdpa()

            def one_fwd_bwd():
                sdpa().backward(ds)
                qs.grad = ks.grad = vs.grad = None

            with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
                f, fb = timed(one_fwd), timed(one_fwd_bwd)
            single = {"fwd_ms": f, "fwd_bwd_ms": fb}
            say(f"  {'one GPU, SDPA cuDNN':28} fwd {f:9.3f} ms  bwd {fb - f:9.3f} ms  fwd+bwd {fb:9.3f} ms")

    if rank == 0:
        env = run_environment()
        if env["variables"]:
            print("\n# fabric: " + env["fabric"] + " (" + " ".join(f"{k}={v}" for k, v in env["variables"].items()) + ")")
        print()
        print(f"| implementation | fwd ms | bwd ms | fwd+bwd ms | tokens/s | peak GiB | speedup | efficiency |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            if single:
                r["speedup"] = single["fwd_bwd_ms"] / r["fwd_bwd_ms"]
                r["parallel_efficiency"] = r["speedup"] / n
            sp = f"{r['speedup']:.2f}x | {100 * r['parallel_efficiency']:.0f}%" if single else "- | -"
            print(f"| {r['name']} | {r['fwd_ms']:.3f} | {r['bwd_ms']:.3f} | {r['fwd_bwd_ms']:.3f} | "
                  f"{r['tokens_per_s']:.0f} | {max(r['torch_peak_gib'], r['device_used_gib']):.2f} | {sp} |")
        base = [r for r in rows if r["name"].startswith("torch ")]
        ratio = None
        if base:
            best = min(base, key=lambda r: r["fwd_bwd_ms"])
            ratio = {"baseline": best["name"], "fwd_bwd": best["fwd_bwd_ms"] / rows[0]["fwd_bwd_ms"],
                     "fwd": min(r["fwd_ms"] for r in base) / rows[0]["fwd_ms"]}
            print(f"\ntasp / best baseline ({best['name']}): fwd+bwd {ratio['fwd_bwd']:.2f}x, fwd {ratio['fwd']:.2f}x")
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"format": "tasp-bench/1", "ranks": n, "device": torch.cuda.get_device_name(),
                           "shape": {"B": B, "S": S, "H": H, "Hkv": Hkv, "D": D, "causal": causal, "window": window,
                                     "dtype": dtype_name, "cu_seqlens": list(cu) if cu else None}, "config": a.config, "timing_method": a.timing_method,
                           "rows": rows, "single_gpu": single, "vs_best_baseline": ratio, "fabric": ctx.fabric,
                           "environment": run_environment()}, f, indent=1)
    ctx.synchronize()
    dist.destroy_process_group()


def main(argv=None):
    a = parse_args(argv)
    if a.list_configs:
        list_configs()
        return 0
    try:
        B, S = shape_of(a)[:2]
        documents_of(a, B, S)
    except ValueError as e:
        print(f"tasp.bench: {e}", file=sys.stderr)
        return 2
    if "RANK" not in os.environ:
        print("tasp.bench: run it under torchrun (torchrun --nproc_per_node=N -m tasp.bench ...)", file=sys.stderr)
        return 2
    run(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
