"""tasp inside a training script: `Context` holds one process group's plans (one per shape, dtype and mask) and
each plan's rank on this process's GPU (the C ABI's tasp_rank: tasp's kernels and NCCL schedule on PyTorch's
tensors and current stream), all on one NCCL communicator (tasp_group); `attention` is the autograd function over it, on this rank's shard in flash-attn's
layout. One process per GPU (torchrun); the shard's tokens in the plan's order, which `Context.shard` makes."""
import collections
import ctypes
import json
import math
import os
import shutil
import tempfile
import weakref

import torch

import tasp
from tasp._lib import NCCL_ID_BYTES, check, lib
from tasp.torch import ops

__all__ = ["Context", "attention"]

# Schemes a rank runs on the caller's tensors (bindings/tasp.h).
_SCHEMES = ("ring", "zigzag", "allgather", "hamilton", "two-level")  # token-parallel: auto chooses among these
# Head-parallel: by name (their GPUs' tokens follow the same layouts: planner/layout.hpp); not yet among auto's choices
# (their rank path is built, not yet checked on GPUs: docs/python.md).
_HEAD_SCHEMES = ("ulysses", "usp")


def _detect_topology(n):
    """complete:N on one node (an NVSwitch box); cluster:MxU across M nodes of U GPUs (torchrun's LOCAL_WORLD_SIZE)."""
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE", n) or n)
    if per_node >= n or n % per_node:
        return f"complete:{n}"
    return f"cluster:{n // per_node}x{per_node}"


def _offsets(cu_seqlens):
    """cu_seqlens as a tuple of ints (a tensor read once: per element, a CUDA tensor would synchronise per offset)."""
    return tuple(int(x) for x in (cu_seqlens.tolist() if isinstance(cu_seqlens, torch.Tensor) else cu_seqlens))


class _Shape:
    """A tensor's shape alone (the whole sequence's, which no rank holds)."""

    def __init__(self, *shape):
        self.shape = shape


class _Group:
    """This process's place in the group (tasp_group: the NCCL communicator and the two streams every plan's rank
    runs on), destroyed with the object after the ranks that hold it."""

    def __init__(self, n, rank, device, nccl_id, timeout):
        handle = ctypes.c_void_p()
        check(lib.tasp_group_create(n, rank, device, nccl_id, ctypes.byref(handle)), "Context")
        self.handle = handle
        # A call not ended `timeout` s after it was enqueued aborts the communicator (a peer missing or stalled):
        # later calls and synchronize() raise tasp.TaspError saying which call, instead of a hang.
        check(lib.tasp_group_watch(handle, int(math.ceil(timeout))), "Context")

    def __del__(self):
        if getattr(self, "handle", None) and lib is not None:
            lib.tasp_group_destroy(self.handle)
            self.handle = None


class _Recent:
    """A mapping that keeps its `limit` most recently used entries (get and put both use one)."""

    def __init__(self, limit, items=()):
        self.limit, self._d = limit, collections.OrderedDict(items)

    def get(self, key):
        v = self._d.get(key)
        if v is not None:
            self._d.move_to_end(key)
        return v

    def put(self, key, value):
        self._d[key] = value
        self._d.move_to_end(key)
        while len(self._d) > self.limit:
            self._d.popitem(last=False)
        return value

    def values(self):
        return list(self._d.values())

    def items(self):
        return list(self._d.items())

    def __len__(self):
        return len(self._d)


class _Rank:
    """A plan's rank on this GPU (tasp_rank), destroyed with the object; it keeps its group alive."""

    def __init__(self, plan, group, timeout):
        handle = ctypes.c_void_p()
        check(lib.tasp_rank_create(plan._handle, group.handle, int(timeout), ctypes.byref(handle)), "Context")
        self.handle, self.plan, self.group = handle, plan, group
        saved = ctypes.c_size_t()
        check(lib.tasp_rank_saved_bytes(handle, ctypes.byref(saved)), "Context")
        self.saved_bytes = saved.value  # what a forward keeps for its backward (the plan's kept K/V)
        self.key = ops.register(self)  # what the custom ops (tasp.torch.ops) name it by
        self.docs = ()  # the packed documents' offsets its work lists are masked for now (re-maskable ranks)

    def documents(self, cu):
        """Re-masks the rank's work lists for documents `cu` (tasp_rank_documents), unless they are its current ones."""
        if cu != self.docs:
            check(lib.tasp_rank_documents(self.handle, (ctypes.c_longlong * len(cu))(*cu), len(cu)), "attention")
            self.docs = cu

    def __del__(self):
        if getattr(self, "handle", None) and lib is not None:
            lib.tasp_rank_destroy(self.handle)
            self.handle = None


class _Documents:
    """A rank as calls with one set of packed documents name it: the custom ops take it where they take a rank, and
    each call re-masks the rank for its documents first (nothing when they are the current ones), so a forward and
    its backward run on the same documents even when other calls came between them (micro-batches, pipelines)."""

    def __init__(self, rank, cu):
        self.rank, self.cu, self.plan, self.saved_bytes = rank, cu, rank.plan, rank.saved_bytes
        self.key = ops.register(self)

    @property
    def handle(self):
        self.rank.documents(self.cu)
        return self.rank.handle


class Context:
    """One process group's tasp plans, each with its rank on this process's GPU.

    group: a torch.distributed group (default the world's; one GPU per process, NCCL).
    topology: a machine file or shorthand (default: complete:N on one node, cluster:MxU over nodes).
    scheme: a scheme's name, or "auto": the fastest the simulator predicts among `candidates` (default the
        token-parallel ones: ring, zigzag, allgather, hamilton, two-level on clusters; ulysses and usp may be added,
        checked through PyTorch on 2 GPUs and not yet timed there).
    profile: the simulator's machine profile. memory_budget: GiB a rank may keep (allgather keeps K/V within it).
    layout: the shard's token order (default zigzag under a causal mask, contiguous otherwise; ring-flash-attention's
        ring wants contiguous, its zigzag ring zigzag).
    timeout: seconds a call may take from being enqueued before the group's watchdog aborts its communicator (a peer
        missing or stalled: later calls and `synchronize` raise tasp.TaspError saying which), and what `synchronize`
        waits at most; default 600, PyTorch's NCCL watchdog's: a training step's queue may run far behind the host,
        and a false alarm ends the job.
    max_plans: plans (each with its GPU buffers) kept at once, the least recently used released beyond that once no
        pending backward holds it. Packed documents (cu_seqlens) under a token order that does not follow them
        (layout contiguous or zigzag; no window) share one plan per shape: each call re-masks its rank for its
        documents, with no planning and no allocation per step; otherwise a plan per document set.
    deterministic: the backward's dQ bit-identical from run to run (dK and dV always are), at some speed
        (docs/measurements/kernels.md).
    collectives: how an allgather plan's ranks gather K/V and reduce-scatter dK/dV: "auto" (default), whichever
        `profile` times faster (NCCL runs collectives 1.45x faster than send/recv over sockets, slower on NVLink
        between 2 GPUs: docs/measurements/fabrics.md; a profile measured on the fabric: tasp calibrate --measure);
        True, NCCL collectives; False, grouped send/recv.
    root_comms: those collectives as one broadcast (gathers) or reduce (dK/dV) a rank, each on a NCCL communicator
        of its own, instead of one all-gather or reduce-scatter: None (default), as `profile` measured its
        collectives (the shipped 2x H200 socket and host-memory profiles: so; over loopback sockets two broadcasts
        moved 5.2 GB/s a direction where one all-gather moved 3.5: docs/measurements/fabrics.md); True or False.
    gather_pieces: an allgather plan's shard in this many pieces, each gathered and its dK/dV sent home beside the
        compute on the ones before (a slow fabric's link busy while the GPU is); None (default): the count from 1 to 4
        that `profile` simulates fastest (over sockets 2 pieces ran qwen3_14b 8.5% faster, through host memory 6.5%
        slower: docs/measurements/executor.md).
    gather_steps: how many of those pieces each forward step gathers, e.g. (2, 1, 1): the steps shrink toward the
        forward's end and the backward takes them in reverse, so the ends that nothing hides are small; None
        (default): as `profile` simulates fastest (over sockets 4 pieces in steps of 4, 2, 1, 1 ran `medium` 0.84x the
        time of 4 one a step).
    prune_plain: under a plain causal mask send a rank only the K/V its queries see and return only the dK/dV they
        made; an allgather plan then cuts its pieces by chunk, so on 2 ranks rank 0 sends half (through host memory,
        one medium for both directions, 0.82x the time of the whole exchange at B=1 S=8192:
        docs/measurements/executor.md). None (default): as `profile` simulates fastest; True or False.
    move_queries: on 2 ranks under a plain causal mask, rank 0's late chunk's queries computed at rank 1 (their Q,
        and the backward's dO, sent there; the partial out and dQ back): a pass moves 4 chunk tensors where pruning
        alone moves 6 (through host memory `medium` ran 0.94x pruning's time: docs/measurements/executor.md). None
        (default): where `profile`'s collectives go one a root (host memory, sockets on 2x H200) and it simulates
        them fastest (over sockets in 4 pieces, what comes back crossing what goes out: 0.73-0.76x the whole
        exchange's time); True or False.
    measure_fabric: True: when the context makes its communicator (its first attention call, on every rank
        together) the ranks time the fabric's NCCL steps on it (tasp_group_measure_fabric: about 1 s on NVLink, 9-20 s
        over loopback sockets) and every plan reads `profile` (or the topology's) with its comm refitted to them;
        `fabric` then says how far they were from it. Over loopback sockets, whose rate moves between minutes, steps
        measured minutes before a run read it 10-26% off, steps measured by the run itself 2.6% median, 6.1% at most
        (docs/measurements/model.md). Default False."""

    def __init__(self, group=None, topology=None, scheme="auto", profile=None, memory_budget=None, layout=None,
                 timeout=600, max_plans=16, deterministic=False, candidates=None, collectives="auto",
                 gather_pieces=None, root_comms=None, gather_steps=None, prune_plain=None, move_queries=None,
                 measure_fabric=False):
        import torch.distributed as dist
        if not (dist.is_available() and dist.is_initialized()):
            raise ValueError("group: torch.distributed is not initialized (torch.distributed.init_process_group first)")
        if scheme != "auto" and scheme not in _SCHEMES + _HEAD_SCHEMES:
            raise ValueError(f"scheme: expected auto or one of {', '.join(_SCHEMES + _HEAD_SCHEMES)}, got {scheme!r}")
        if layout not in (None, "contiguous", "zigzag"):
            raise ValueError(f"layout: expected None, 'contiguous' or 'zigzag', got {layout!r}")
        if memory_budget is not None and not (isinstance(memory_budget, (int, float)) and memory_budget > 0):
            raise ValueError(f"memory_budget: expected GiB (a positive number), got {memory_budget!r}")
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ValueError(f"timeout: expected seconds (a positive number), got {timeout!r}")
        if not (isinstance(max_plans, int) and max_plans >= 1):
            raise ValueError(f"max_plans: expected a positive integer, got {max_plans!r}")
        if not isinstance(deterministic, bool):
            raise ValueError(f"deterministic: expected True or False, got {deterministic!r}")
        if collectives not in (False, True, "auto") or isinstance(collectives, int) and not isinstance(collectives, bool):
            raise ValueError(f"collectives: expected False, True or 'auto', got {collectives!r}")
        if root_comms not in (None, False, True) or isinstance(root_comms, int) and not isinstance(root_comms, bool):
            raise ValueError(f"root_comms: expected None, False or True, got {root_comms!r}")
        if prune_plain not in (None, False, True) or isinstance(prune_plain, int) and not isinstance(prune_plain, bool):
            raise ValueError(f"prune_plain: expected None, False or True, got {prune_plain!r}")
        if move_queries not in (None, False, True) or isinstance(move_queries, int) and not isinstance(move_queries, bool):
            raise ValueError(f"move_queries: expected None, False or True, got {move_queries!r}")
        if not isinstance(measure_fabric, bool):
            raise ValueError(f"measure_fabric: expected True or False, got {measure_fabric!r}")
        if gather_pieces is not None and not (isinstance(gather_pieces, int) and not isinstance(gather_pieces, bool) and
                                              1 <= gather_pieces <= 64):
            raise ValueError(f"gather_pieces: expected None (the simulator's choice) or 1 to 64, got {gather_pieces!r}")
        if gather_steps is not None:
            if (isinstance(gather_steps, (str, bytes)) or not hasattr(gather_steps, "__iter__") or
                    not all(isinstance(k, int) and not isinstance(k, bool) and k >= 1 for k in gather_steps) or
                    not 1 <= sum(gather_steps) <= 64 or
                    (gather_pieces is not None and sum(gather_steps) != gather_pieces)):
                raise ValueError(f"gather_steps: expected None or counts of pieces (each at least 1, 64 in all at most, "
                                 f"summing to gather_pieces where given), got {gather_steps!r}")
            gather_steps = tuple(gather_steps)
        if candidates is not None:
            if scheme != "auto":
                raise ValueError(f"candidates: the schemes auto chooses among, so scheme must be 'auto', got {scheme!r}")
            if isinstance(candidates, str) or not candidates or any(c not in _SCHEMES + _HEAD_SCHEMES for c in candidates):
                raise ValueError(f"candidates: expected a non-empty list of {', '.join(_SCHEMES + _HEAD_SCHEMES)}, "
                                 f"got {candidates!r}")
            candidates = tuple(candidates)
        self.group = group if group is not None else dist.group.WORLD
        self.n, self.rank = dist.get_world_size(self.group), dist.get_rank(self.group)
        self.topology = str(topology) if topology is not None else _detect_topology(self.n)
        self.scheme, self.profile, self.memory_budget = scheme, profile, memory_budget
        self.layout, self.timeout, self.max_plans, self.deterministic = layout, timeout, max_plans, deterministic
        self.collectives, self.gather_pieces, self.root_comms = collectives, gather_pieces, root_comms
        self.gather_steps, self.prune_plain, self.move_queries = gather_steps, prune_plain, move_queries
        self.candidates = candidates or _SCHEMES
        self.measure_fabric = measure_fabric
        self.fabric = None  # measure_fabric: what tasp_group_measure_fabric said (profile, seconds, now_over_profile)
        self._fitted = None  # measure_fabric: the profile fitted to the fabric, which every plan reads
        self._group = None  # _Group, made with the first plan
        self._closed = False
        self._ranks = _Recent(max_plans)       # plan key -> _Rank
        self._layouts = _Recent(4 * max_plans)  # (S, causal, docs) -> the layout plan (token order only; host memory)
        # (plan key, documents) -> _Documents: one per document set, so the custom ops see the same rank number for the
        # same documents (torch.compile keeps its graph). Kept here, not on the rank: a rank holding views that hold it
        # is a cycle, which the garbage collector finalises in an order of its own.
        self._views = _Recent(8 * max_plans)

    # ---- plans

    def _options(self, causal, docs):
        # framework: the plan's prediction (and auto's choice) counts the rank's copies to and from PyTorch's tensors.
        o = {"layout": self.layout or ("zigzag-docs" if causal and docs else "zigzag" if causal else "contiguous"),
             "framework": True}
        if self.scheme == "auto":
            # zigzag needs a causal mask and its own layout, two-level nodes (the shorthand's; a machine file's nodes
            # get the others)
            o["schemes"] = ",".join(s for s in self.candidates
                                    if (s != "zigzag" or (causal and o["layout"] != "contiguous")) and
                                    (s != "two-level" or self.topology.startswith("cluster:")))
        if self._fitted or self.profile:
            o["profile"] = str(self._fitted or self.profile)
        if self.memory_budget:
            o["memory_budget_gib"] = float(self.memory_budget)
        if self.deterministic:
            o["deterministic"] = True
        if self.collectives != "auto":
            o["collectives"] = self.collectives
        if self.gather_pieces is not None:
            o["gather_pieces"] = self.gather_pieces
        if self.root_comms is not None:
            o["root_comms"] = self.root_comms
        if self.gather_steps is not None:
            o["gather_steps"] = list(self.gather_steps)
        if self.prune_plain is not None:
            o["prune_plain"] = self.prune_plain
        if self.move_queries is not None:
            o["move_queries"] = self.move_queries
        return o

    def _workload(self, q, k, causal, window, cu_seqlens):
        """The whole sequence's workload text from this rank's shard (S = S_local * n, or cu_seqlens' end)."""
        B, s_local, H, D = q.shape
        S = int(cu_seqlens[-1]) if cu_seqlens is not None else s_local * self.n
        text = tasp.torch.workload_text(_Shape(B, S, H, D), _Shape(B, S, k.shape[2], D), causal, window, cu_seqlens)
        return text + (",fp16" if q.dtype == torch.float16 else ""), S

    def _remaskable(self, causal, window):
        """Whether plans for packed documents can be one per shape, re-masked per call (tasp_rank_documents): a token
        order that ignores documents, a schedule no window pruned, a token-parallel scheme."""
        layout = self.layout or ("contiguous" if not causal else None)  # causal default: zigzag-docs, which follows them
        heads = self.scheme in _HEAD_SCHEMES or (self.scheme == "auto" and any(c in _HEAD_SCHEMES for c in self.candidates))
        return layout in ("contiguous", "zigzag") and window is None and not heads

    def _rank_for(self, q, k, causal, window, cu_seqlens):
        if self._closed:
            raise ValueError("ctx: this Context was closed")
        docs = cu_seqlens is not None and len(cu_seqlens) > 2
        remask = self._remaskable(causal, window)
        text, S = self._workload(q, k, causal, window, cu_seqlens)  # (checks cu_seqlens)
        cu = ()
        if remask and docs:  # the plan of the shape without documents; the call's documents mask its rank's work lists
            text, _ = self._workload(q, k, causal, window, [0, S])
            cu = _offsets(cu_seqlens)
        key = (text, q.device.index)
        r = self._ranks.get(key)
        if r is None:
            if self.measure_fabric and self._fitted is None:  # the fabric first: the plan reads its profile
                self._measure_fabric(q.device.index)
            plan_docs = docs and not remask
            plan = tasp.Plan(self.topology, self.scheme, text, **self._options(causal, plan_docs))
            if plan.info["gpus"] != self.n:
                raise ValueError(f"topology: {self.topology} has {plan.info['gpus']} GPUs, the group {self.n}")
            mine = sum(e - b for b, e in plan.tokens(self.rank))
            if mine != q.shape[1]:
                raise ValueError(f"q: this rank's shard holds {mine} tokens under the plan, q has {q.shape[1]} "
                                 f"(lay the sequence out with Context.shard)")
            if plan.tokens(self.rank) != self._layout_plan(S, causal, cu_seqlens).tokens(self.rank):
                raise ValueError(f"scheme: {plan.info['scheme']}'s token order is not the context's layout "
                                 f"({self._options(causal, docs)['layout']}); choose another scheme or layout")
            r = self._ranks.put(key, _Rank(plan, self._group_on(q.device.index), self.timeout))
            live = set(map(id, self._ranks.values()))  # views of ranks the cache let go go too
            self._views = _Recent(self._views.limit, [(k, v) for k, v in self._views.items() if id(v.rank) in live])
        if not remask:
            return r
        v = self._views.get((key, cu))
        return v if v is not None else self._views.put((key, cu), _Documents(r, cu))

    def _group_on(self, device):
        """The context's communicator (one for every plan of the context), made with its first plan."""
        if self._group is None:
            self._group = _Group(self.n, self.rank, device, self._nccl_id(), self.timeout)
        return self._group

    def _measure_fabric(self, device):
        """The fabric's NCCL steps timed on the group's communicator by every rank together, and the profile fitted
        to them (a file of this process's, removed with the context) for every plan that follows."""
        group = self._group_on(device)
        where = tempfile.mkdtemp(prefix="tasp-fabric-")
        weakref.finalize(self, shutil.rmtree, where, True)
        path = os.path.join(where, f"rank{self.rank}.profile.yaml")
        # A point of the measuring not done within the context's timeout (a peer missing or stalled) aborts the group.
        options = {"timeout_s": int(math.ceil(self.timeout))}
        if self.profile:
            options["profile"] = str(self.profile)
        options = json.dumps(options)
        said = ctypes.c_char_p()
        check(lib.tasp_group_measure_fabric(group.handle, self.topology.encode(), options.encode(),
                                            path.encode(), ctypes.byref(said)), "measure_fabric")
        self.fabric, self._fitted = json.loads(said.value.decode()), path

    def _nccl_id(self):
        """A new NCCL id made on the group's first rank and broadcast to the others (at plan time only)."""
        import torch.distributed as dist
        box = [None]
        if self.rank == 0:
            buf = ctypes.create_string_buffer(NCCL_ID_BYTES)
            check(lib.tasp_nccl_id(buf), "Context")
            box[0] = buf.raw
        dist.broadcast_object_list(box, src=dist.get_global_rank(self.group, 0), group=self.group)
        return box[0]

    def scheme_for(self, q, k, causal=False, window=None, cu_seqlens=None):
        """What the plan for this shard runs and why (auto: every scheme's predicted time)."""
        info = self._rank_for(q, k, causal, window, cu_seqlens).plan.info
        how = ("; NCCL collectives" + (", one a root" if info.get("root_comms") else "")) if info.get("collectives") else ""
        return f"{info['scheme']} ({info['detail'] or 'named'}; predicted {info['predicted_us'] / 1e3:.3f} ms{how})"

    # ---- the token order

    def _layout_plan(self, S, causal, cu_seqlens):
        docs = _offsets(cu_seqlens) if cu_seqlens is not None else ()
        key = (S, causal, docs)
        if self._layouts.get(key) is None:
            # The token order alone: a plan of any head count (workload_text checks the mask arguments).
            text = tasp.torch.workload_text(_Shape(1, S, self.n, 64), _Shape(1, S, self.n, 64), causal, None,
                                            cu_seqlens)
            o = self._options(causal, len(docs) > 2)
            for option in ("schemes", "profile", "memory_budget_gib", "deterministic", "framework", "collectives",
                           "move_queries"):  # (an allgather plan's computation, not its token order)
                o.pop(option, None)
            return self._layouts.put(key, tasp.Plan(self.topology, "ring", text, **o))
        return self._layouts.get(key)

    def shard(self, x, dim=1, causal=False, cu_seqlens=None):
        """This rank's shard of the full tensor x (the sequence along `dim`), in the order its plans want."""
        return self._layout_plan(x.shape[dim], causal, cu_seqlens).shard(x, self.rank, dim)

    def unshard(self, x, dim=1, causal=False, cu_seqlens=None):
        """The full tensor from this rank's shard x: every rank's gathered over the group (all_gather), reordered.
        Shards may differ in length (documents split unevenly): each travels padded to the longest."""
        import torch.distributed as dist
        layout = self._layout_plan_for(x, dim, causal, cu_seqlens)
        counts = [sum(e - b for b, e in layout.tokens(r)) for r in range(self.n)]
        if x.shape[dim] != counts[self.rank]:
            raise ValueError(f"x: this rank's shard holds {counts[self.rank]} tokens along dim {dim}, x has {x.shape[dim]}")
        longest = max(counts)
        padded = x
        if x.shape[dim] < longest:
            pad = list(x.shape)
            pad[dim] = longest - x.shape[dim]
            padded = torch.cat([x, x.new_zeros(pad)], dim)
        parts = [torch.empty_like(padded) for _ in range(self.n)]
        dist.all_gather(parts, padded.contiguous(), group=self.group)
        parts = [p.narrow(dim, 0, c) for p, c in zip(parts, counts)]
        return layout.unshard(parts, dim)

    def _layout_plan_for(self, x, dim, causal, cu_seqlens):
        """The layout plan of the whole sequence a shard x belongs to (S: cu_seqlens' end, or the shards' sum)."""
        if cu_seqlens is not None:
            S = int(cu_seqlens[-1])
        else:
            S = x.shape[dim] * self.n  # without documents, a sequence the ranks split evenly
            plan = self._layout_plan(S, causal, None)
            if sum(e - b for b, e in plan.tokens(self.rank)) != x.shape[dim]:
                raise ValueError(f"x: {x.shape[dim]} tokens along dim {dim} is not a shard of an evenly split "
                                 f"sequence; pass cu_seqlens, or shard with Context.shard")
            return plan
        return self._layout_plan(S, causal, cu_seqlens)

    def device_bytes(self):
        """Device memory this context's plans hold outside PyTorch's allocator (their ranks' own buffers; NCCL's and
        the CUDA context's not counted), the plans it keeps now."""
        total = 0
        for r in self._ranks.values():
            b = ctypes.c_size_t()
            check(lib.tasp_rank_device_bytes(r.handle, ctypes.byref(b)), "device_bytes")
            total += b.value
        return total

    def close(self):
        """Lets go of every plan (their GPU buffers) and the communicator now, not when the context is collected; a
        plan a pending backward still holds goes once that backward has run. The context takes no calls after."""
        self._ranks, self._views, self._group, self._closed = _Recent(self.max_plans), _Recent(1), None, True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def synchronize(self):
        """Waits for every plan's work so far, at most the timeout; raises tasp.TaspError naming NCCL's error or the
        stalled wait."""
        for r in self._ranks.values():
            check(lib.tasp_rank_wait(r.handle), "synchronize")


def attention(q, k, v, causal=False, window=None, cu_seqlens=None, softmax_scale=None, ctx=None, return_lse=False):
    """Attention over the whole sequence from this rank's shard: q [B, S_local, H, D], k and v [B, S_local, Hkv, D]
    (bf16 or fp16, on this process's GPU, tokens in the order Context.shard gives), causal, window=(left, right) as
    flash-attn's window_size (-1 unbounded), cu_seqlens: the packed documents' offsets [0, ..., S] of the whole B=1
    sequence, softmax_scale (default 1/sqrt(D)), ctx: a Context (default: one on the world group). Returns this
    rank's output shard; differentiable in q, k and v through tasp's backward. return_lse=True: (out, lse), lse fp32
    [B, H, S_local], the log of each row's softmax sum over the scaled scores (flash-attn's softmax_lse), not
    differentiable (as flash-attn's); token-parallel schemes only (head-parallel ones keep it in their own layout)."""
    if not isinstance(return_lse, bool):
        raise ValueError(f"return_lse: expected True or False, got {return_lse!r}")
    tasp.torch._check_qkv(q, k, v, devices=("cuda",), dtypes=(torch.bfloat16, torch.float16))
    if ctx is None:
        ctx = _default_context()
    elif not isinstance(ctx, Context):
        raise ValueError(f"ctx: expected a tasp.torch.Context, got {type(ctx).__name__}")
    if softmax_scale is not None and (not isinstance(softmax_scale, (int, float)) or not softmax_scale > 0):
        raise ValueError(f"softmax_scale: expected a positive number, got {softmax_scale!r}")
    q, k, v = (x.contiguous() for x in (q, k, v))
    if cu_seqlens is not None:  # read once (a CUDA tensor's offsets cost a synchronisation each time they are read)
        cu_seqlens = _offsets(cu_seqlens)
    rank = ctx._rank_for(q, k, causal, window, cu_seqlens)
    if return_lse and rank.plan.info["scheme"] in _HEAD_SCHEMES:
        raise ValueError(f"return_lse: the {rank.plan.info['scheme']} plan keeps the LSE in its head layout; choose a "
                         f"token-parallel scheme (Context(scheme=...) or candidates) to get it")
    # The kept K/V only where a backward will follow: a forward under no_grad keeps nothing.
    grad = torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v))
    # The kernels take the scale (0: 1/sqrt(D)), so another one costs nothing beside them.
    out, lse, _ = ops.attention_fwd(q, k, v, rank.key, rank.saved_bytes if grad else 0, float(softmax_scale or 0.0))
    return (out, lse.detach()) if return_lse else out


_DEFAULT = {}


def _default_context():
    import torch.distributed as dist
    key = id(dist.group.WORLD) if dist.is_available() and dist.is_initialized() else None
    if key not in _DEFAULT:
        _DEFAULT[key] = Context()
    return _DEFAULT[key]
