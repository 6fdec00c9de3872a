"""Runs worker(rank, *args, port) in one process per rank (spawned, every visible GPU a rank) and exits with the worst
exit code: the launcher of the PyTorch-side tools (torch_ring.py, nccl_directions.py), which set MASTER_ADDR and
MASTER_PORT from `port` before init_process_group."""
import os
import sys

import torch.multiprocessing as mp


def spawn_ranks(worker, n, *args):
    ctx = mp.get_context("spawn")
    port = 29500 + os.getpid() % 1000
    procs = [ctx.Process(target=worker, args=(r, *args, port)) for r in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    sys.exit(max(p.exitcode for p in procs))
