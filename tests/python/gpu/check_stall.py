"""A peer that stops calling ends a tasp.torch call within the Context's timeout, never a hang (run under torchrun on 2+
GPUs; tools/gpu/python.sh stall). Every rank runs one forward and backward together; then the last rank stops while
the others go on: their next attention waits in NCCL for it, the group's watchdog aborts the communicator after
`timeout` seconds, and ctx.synchronize() raises tasp.TaspError naming the call. How the peer stops: `stall` (default:
it sleeps, alive and silent) or `exit` (its process ends at once, mid-run, as a crash would); `first`: the last rank,
its communicator made, never calls at all (the others' first call blocks in NCCL's connecting); `measure`: the others
measure the fabric (Context(measure_fabric=True)) while the last rank never does. Prints PASS
or FAIL on rank 0 with the seconds it took; exits 1 on FAIL.
Usage: torchrun --nproc_per_node=N tests/python/gpu/check_stall.py [stall|exit|first|measure]"""
import os
import sys
import time

import torch
import torch.distributed as dist

import tasp
import tasp.torch as tt

TIMEOUT = 5


def report(ok, took, what, why):
    ok = ok and took < 3 * TIMEOUT
    if dist.get_rank() == 0:
        print(f"{'PASS' if ok else 'FAIL'} {what}: rank 0 raised after {took:.1f} s (timeout {TIMEOUT} s): {why}", flush=True)
    os._exit(0 if ok else 1)


def without_a_peer(rank, n, what, **options):
    """The last rank joins the communicator (every rank must) and then never calls: the others' first call (its NCCL
    connections, made at first use with the calling thread blocked until the peer comes; or the fabric's measuring,
    measure_fabric=True) ends within the timeout, named."""
    ctx = tt.Context(scheme="allgather", timeout=TIMEOUT, **options)
    q, k, v = (torch.randn(1, 1024, 8, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    if rank == n - 1:
        ctx._group_on(q.device.index)
        time.sleep(6 * TIMEOUT)
        os._exit(0)
    t0 = time.monotonic()
    ok, why = False, "no error"
    try:
        tt.attention(q, k, v, causal=True, ctx=ctx)
        ctx.synchronize()
    except tasp.TaspError as e:
        ok, why = "did not finish" in str(e) or "aborted" in str(e), str(e)
    report(ok, time.monotonic() - t0, what, why)


def main():
    dist.init_process_group("nccl")
    rank, n = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    how = sys.argv[1] if len(sys.argv) > 1 else "stall"
    if how == "measure":
        without_a_peer(rank, n, "a peer that never measures", measure_fabric=True)
    if how == "first":
        without_a_peer(rank, n, "a peer that never calls")
    ctx = tt.Context(scheme="allgather", timeout=TIMEOUT)
    q, k, v = (torch.randn(1, 1024, 8, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    tt.attention(q, k, v, causal=True, ctx=ctx).sum().backward()
    ctx.synchronize()
    dist.barrier()
    if rank == n - 1:  # the peer that stops: alive and silent, or gone
        if how == "stall":
            time.sleep(6 * TIMEOUT)
        os._exit(0)
    t0 = time.monotonic()
    ok, why = False, "no error"
    try:
        with torch.no_grad():
            tt.attention(q, k, v, causal=True, ctx=ctx)
        ctx.synchronize()
    except tasp.TaspError as e:
        ok, why = "did not finish" in str(e) or "aborted" in str(e), str(e)
    report(ok, time.monotonic() - t0, f"{'stalled' if how == 'stall' else 'exited'} peer", why)


if __name__ == "__main__":
    main()
