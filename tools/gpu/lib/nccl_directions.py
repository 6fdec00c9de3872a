#!/usr/bin/env python3
"""How fast NCCL moves bytes in each direction between 2 GPUs, by the kind of call: the question behind moving queries
on a slow fabric (docs/plan-format.md, "Queries moved to keys"), whose 3 units a direction are 3 only if each direction
runs as its own pipeline. For each size X a rank sends, the median wall time of:
  allgather   one ncclAllGather, X from each rank (X each direction at once)
  sendrecv    grouped send/recv, X each way (what a pipeline of point-to-point transfers uses)
  bcast-pair  two communicators, each a broadcast of X from its own root, issued together (X each direction, each
              direction a collective of its own that can run as a pipeline beside the other)
  bcast-one   one broadcast of X (one direction alone)
  reducescatter  one ncclReduceScatter of 2X a rank (X each direction, summed at the receiver)
  reduce-pair two communicators, each a reduce of X to its own root, issued together
GB/s is X over the time: the rate each direction ran at. Runs only on GPU machines with PyTorch.
Usage: nccl_directions.py [--sizes-mib 16,32,64] [--iters 7] [--csv out.csv]   (2 visible GPUs; NCCL's env as given)
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
from spawn_ranks import spawn_ranks


def timed(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(iters):
        dist.barrier()
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        out.append(time.perf_counter() - t)
    return statistics.median(out) * 1e3


def worker(rank, args, port):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=2, device_id=torch.device("cuda", rank))
    g0, g1 = dist.new_group([0, 1]), dist.new_group([0, 1])  # a communicator per direction
    peer = 1 - rank
    rows = []
    for mib in (int(s) for s in args.sizes_mib.split(",")):
        n = mib * (1 << 20) // 2
        x = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        y = torch.empty(2 * n, device="cuda", dtype=torch.bfloat16)
        a, b = x.clone(), x.clone()

        def allgather():
            dist.all_gather_into_tensor(y, x)

        def sendrecv():
            for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, x, peer), dist.P2POp(dist.irecv, a, peer)]):
                w.wait()

        def bcast_pair():
            w = [dist.broadcast(a, 0, group=g0, async_op=True), dist.broadcast(b, 1, group=g1, async_op=True)]
            for h in w:
                h.wait()

        def bcast_one():
            dist.broadcast(a, 0, group=g0)

        def reducescatter():
            dist.reduce_scatter_tensor(a, y)

        def reduce_pair():
            w = [dist.reduce(a, 0, group=g0, async_op=True), dist.reduce(b, 1, group=g1, async_op=True)]
            for h in w:
                h.wait()

        for name, fn in (("allgather", allgather), ("sendrecv", sendrecv), ("bcast-pair", bcast_pair),
                         ("bcast-one", bcast_one), ("reducescatter", reducescatter), ("reduce-pair", reduce_pair)):
            ms = timed(fn, args.warmup, args.iters)
            rows.append((name, mib, ms, mib * (1 << 20) / (ms * 1e6)))
            if rank == 0:
                print(f"  {name:13} {mib:4} MiB a direction  {ms:9.3f} ms  {rows[-1][3]:6.2f} GB/s", flush=True)
    if rank == 0 and args.csv:
        with open(args.csv, "w") as f:
            f.write("call,mib,ms,gbps,nccl_env\n")
            env = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("NCCL_"))
            for r in rows:
                f.write(f"{r[0]},{r[1]},{r[2]:.4f},{r[3]:.3f},\"{env}\"\n")
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes-mib", default="16,32,64")
    ap.add_argument("--iters", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--csv")
    a = ap.parse_args()
    if torch.cuda.device_count() < 2:
        sys.exit("nccl_directions.py needs 2 visible GPUs")
    env = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("NCCL_"))
    print(f"# nccl_directions: 2 x {torch.cuda.get_device_name()}, torch {torch.__version__}, median of {a.iters}; {env}")
    spawn_ranks(worker, 2, a)


if __name__ == "__main__":
    main()
