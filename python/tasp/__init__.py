"""tasp: topology-aware sequence-parallel attention. Plans (ring, zigzag, allgather, Hamilton, two-level, Ulysses,
usp) chosen and verified for a machine, and run through tasp's executor; `tasp.torch` is the PyTorch layer."""
import ctypes
import json

from tasp._lib import TaspError, check, lib

__all__ = ["Plan", "TaspError", "configs"]


def configs():
    """The named workloads (`tasp configs`): a list of dicts with name, group, workload (the -w text), B, S, H, Hkv,
    D, causal, dtype, window_left, window_right, note."""
    return json.loads(lib.tasp_configs_json().decode())


def _cat(pieces, dim):
    """torch.cat, one piece as is (no copy); torch imported only by those who shard tensors."""
    import torch
    return pieces[0] if len(pieces) == 1 else torch.cat(pieces, dim)


class Plan:
    """A verified plan for a topology ("complete:N", "cluster:UxM", a machine file), a scheme ("auto": the fastest the
    simulator finds) and a workload ("B=..,S=..,H=..,Hkv=..,D=..[,causal][,window=L:R][,docs=L1+L2+..]").
    Options: profile, ulysses, inner, head_groups, gather_pieces (0: as the simulator finds fastest), gather_steps
    (a list: how many pieces each forward step gathers), memory_budget_gib,
    layout, pass (fwd | fwd+bwd).
    `info` is what tasp chose: scheme, layout, head groups, the tokens each GPU holds (gpu_tokens), ..."""

    def __init__(self, topology, scheme, workload, **options):
        handle = ctypes.c_void_p()
        opts = json.dumps(options).encode() if options else None
        check(lib.tasp_plan_create(str(topology).encode(), str(scheme).encode(), str(workload).encode(), opts,
                                   ctypes.byref(handle)), "plan")
        self._handle = handle
        self.info = json.loads(lib.tasp_plan_json(handle).decode())

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle and lib is not None:
            lib.tasp_plan_destroy(handle)
            self._handle = None

    def tokens(self, gpu):
        """The sequence's token ranges [begin, end) that `gpu` holds, in its order (zigzag chunks, split documents)."""
        ranges = self.info["gpu_tokens"]
        if not isinstance(gpu, int) or isinstance(gpu, bool) or not 0 <= gpu < len(ranges):
            raise ValueError(f"gpu: expected 0..{len(ranges) - 1}, got {gpu!r}")
        return [tuple(r) for r in ranges[gpu]]

    def shard(self, x, gpu, dim=1):
        """`gpu`'s shard of a full torch tensor `x` (the sequence along `dim`), laid out as the plan wants."""
        total = sum(e - b for r in self.info["gpu_tokens"] for b, e in r)
        if x.shape[dim] != total:
            raise ValueError(f"x: expected {total} tokens along dim {dim}, got shape {tuple(x.shape)}")
        return _cat([x.narrow(dim, b, e - b) for b, e in self.tokens(gpu)], dim)

    def unshard(self, shards, dim=1):
        """The full tensor back from every GPU's shard (a list, in GPU order): shard()'s inverse."""
        ranges = self.info["gpu_tokens"]
        if len(shards) != len(ranges):
            raise ValueError(f"shards: expected one per GPU ({len(ranges)}), got {len(shards)}")
        pieces = []
        for gpu, (x, mine) in enumerate(zip(shards, ranges)):
            if x.shape[dim] != sum(e - b for b, e in mine):
                raise ValueError(f"shards[{gpu}]: expected {sum(e - b for b, e in mine)} tokens along dim {dim}, "
                                 f"got shape {tuple(x.shape)}")
            at = 0
            for b, e in mine:
                pieces.append((b, x.narrow(dim, at, e - b)))
                at += e - b
        return _cat([p for _, p in sorted(pieces, key=lambda t: t[0])], dim)

    def __repr__(self):
        i = self.info
        return f"Plan({i['scheme']} on {i['gpus']} GPUs, layout {i['layout']}, {i['workload']})"
