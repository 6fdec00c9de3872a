"""tasp.torch.Context, attention and compat without GPUs: what they refuse, with a ValueError naming the argument,
before anything runs (their numbers are checked on GPUs: tests/python/gpu/check_attention.py)."""
import ctypes
import json
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

import tasp.torch as tt
from tasp.torch import compat

SOURCE = Path(__file__).resolve().parents[2]  # the repository


def test_context_needs_torch_distributed():
    assert not dist.is_initialized()
    with pytest.raises(ValueError, match="group:"):
        tt.Context()


@pytest.fixture
def one_process_group():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.mark.parametrize("kwargs,names", [
    (dict(scheme="spiral"), "scheme:"),
    (dict(scheme="ulysses2"), "scheme:"),
    (dict(layout="diagonal"), "layout:"),
    (dict(memory_budget=-1), "memory_budget:"),
    (dict(timeout=0), "timeout:"),
    (dict(max_plans=0), "max_plans:"),
    (dict(deterministic="yes"), "deterministic:"),
    (dict(gather_pieces=0), "gather_pieces:"),
    (dict(gather_pieces=2.0), "gather_pieces:"),
    (dict(gather_pieces=True), "gather_pieces:"),
    (dict(gather_steps=(2, 0)), "gather_steps:"),
    (dict(gather_steps="2,1"), "gather_steps:"),
    (dict(gather_steps=(40, 30)), "gather_steps:"),
    (dict(gather_pieces=3, gather_steps=(2, 1, 1)), "gather_steps:"),
    (dict(collectives="yes"), "collectives:"),
    (dict(collectives=1), "collectives:"),
    (dict(root_comms="yes"), "root_comms:"),
    (dict(root_comms=1), "root_comms:"),
    (dict(prune_plain="yes"), "prune_plain:"),
    (dict(prune_plain=0), "prune_plain:"),
    (dict(move_queries="yes"), "move_queries:"),
    (dict(move_queries=1), "move_queries:"),
    (dict(measure_fabric=1), "measure_fabric:"),
    (dict(candidates=["spiral"]), "candidates:"),
    (dict(candidates=[]), "candidates:"),
    (dict(candidates="ulysses"), "candidates:"),
    (dict(scheme="ring", candidates=["ring"]), "candidates:"),
])
def test_context_arguments(one_process_group, kwargs, names):
    with pytest.raises(ValueError, match=names):
        tt.Context(**kwargs)


def test_context_defaults_and_layouts(one_process_group):
    ctx = tt.Context()
    assert (ctx.n, ctx.rank, ctx.topology, ctx.scheme) == (1, 0, "complete:1", "auto")
    x = torch.randn(2, 48, 3)
    assert torch.equal(ctx.unshard(ctx.shard(x, 1, causal=True), 1, causal=True), x)
    with pytest.raises(ValueError, match="cu_seqlens:"):
        ctx.shard(x, 1, causal=True, cu_seqlens=[0, 30, 20, 48])


q = torch.randn(1, 64, 4, 64, dtype=torch.bfloat16)
kv = torch.randn(1, 64, 2, 64, dtype=torch.bfloat16)


@pytest.mark.parametrize("call,names", [
    (lambda: tt.attention(q, kv, kv), "q: expected a tensor on cuda"),
    (lambda: tt.attention(q.float(), kv, kv), "q:"),
    (lambda: compat.ring_flash_attn_func(q, kv, kv, dropout_p=0.1), "dropout_p"),
    (lambda: compat.zigzag_ring_flash_attn_func(q, kv, kv, alibi_slopes=torch.ones(4)), "alibi_slopes"),
    (lambda: compat.ring_flash_attn_func(q, kv, kv, return_attn_probs="yes"), "return_attn_probs"),
    (lambda: tt.attention(q, kv, kv, return_lse=1), "return_lse"),
])
def test_attention_refuses(call, names):
    with pytest.raises(ValueError, match=names):
        call()


def test_custom_ops_have_shapes_for_torch_compile():
    """tasp::attention_fwd and attention_bwd are registered with fake kernels (what torch.compile traces through)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from tasp.torch import ops  # noqa: F401 (registers the ops)
    with FakeTensorMode():
        q = torch.empty(2, 64, 8, 128, dtype=torch.bfloat16)
        k = torch.empty(2, 64, 2, 128, dtype=torch.bfloat16)
        out, lse, saved = torch.ops.tasp.attention_fwd(q, k, k, 0, 4096, 0.0)
        assert out.shape == q.shape and out.dtype == q.dtype
        assert lse.shape == (2, 8, 64) and lse.dtype == torch.float32
        assert saved.shape == (4096,) and saved.dtype == torch.uint8
        dq, dk, dv = torch.ops.tasp.attention_bwd(out, q, k, k, out, lse, saved, 0, 0.0)
        assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == k.shape


def _llama3_reference(cu, causal, rank, world):
    """ring-flash-attention's prepare, written out from its documented meaning: this rank's slice [r L, (r+1) L) of
    the whole sequence; q offsets cut to it; k from the start of the slice's first document to the slice's end
    (causal) or to the end of its last document."""
    total = cu[-1]
    L = total // world
    lo, hi = rank * L, (rank + 1) * L
    docs = list(zip(cu, cu[1:]))
    mine = [(a, b) for a, b in docs if a < hi and b > lo]
    q = [0]
    for a, b in mine:
        q.append(min(b, hi) - lo)
    k_left = mine[0][0]
    k_right = hi if causal else mine[-1][1]
    k = [0] + [min(b, k_right) - k_left for a, b in mine]
    return q, k, slice(k_left, k_right)


@pytest.mark.parametrize("cu,world", [([0, 7, 14, 16], 8), ([0, 7, 14, 16], 2), ([0, 5, 6, 20, 24], 4), ([0, 24], 3)])
def test_llama3_prepare_matches_its_meaning(cu, world):
    for causal in (False, True):
        for rank in range(world):
            cq, ck, mq, mk, ks = compat.llama3_flash_attn_prepare_cu_seqlens(torch.tensor(cu), causal, rank, world)
            q, k, s = _llama3_reference(cu, causal, rank, world)
            assert cq.tolist() == q and ck.tolist() == k and ks == s, (cu, world, causal, rank)
            assert mq == max(b - a for a, b in zip(q, q[1:])) and mk == max(b - a for a, b in zip(k, k[1:]))


@pytest.mark.parametrize("call,names", [
    (lambda: compat.llama3_flash_attn_prepare_cu_seqlens(torch.tensor([0, 7, 15]), True, 0, 2), "world_size"),
    (lambda: compat.llama3_flash_attn_prepare_cu_seqlens(torch.tensor([0, 9, 8, 16]), True, 0, 2), "cu_seqlens"),
    (lambda: compat.llama3_flash_attn_prepare_cu_seqlens(torch.tensor([0, 8, 16]), True, 2, 2), "rank"),
    (lambda: compat.llama3_flash_attn_varlen_func(q[0], kv[0], kv[0], torch.tensor([0, 64]), torch.tensor([0, 64]), 64,
                                                  64, 1, slice(0, 64)), "cu_seqlens_q"),
])
def test_llama3_refuses(call, names):
    with pytest.raises(ValueError, match=names):
        call()


def test_recent_keeps_the_most_recently_used():
    """Context's plan cache (_Recent): beyond its limit the least recently used entry goes, a get counting as use."""
    from tasp.torch.context import _Recent
    c = _Recent(2)
    assert c.put("a", 1) == 1 and c.put("b", 2) == 2
    assert c.get("a") == 1          # "a" now the most recent
    c.put("c", 3)                   # "b" goes
    assert c.get("b") is None and c.get("a") == 1 and c.get("c") == 3 and len(c) == 2
    c.put("d", 4)                   # "a" was used before "c": it goes
    assert c.get("a") is None and sorted(c.values()) == [3, 4]


def test_ops_hold_ranks_weakly():
    """The custom ops' registry does not keep a rank alive: once its Context (here: the test) drops it, naming it is
    an error, not a call on a destroyed handle."""
    import gc
    from tasp.torch import ops

    class Rank:
        handle = None

    r = Rank()
    key = ops.register(r)
    assert ops.rank_of(key) is r
    del r
    gc.collect()
    with pytest.raises(RuntimeError, match="released"):
        ops.rank_of(key)


class _FakeLib:
    """The C library's rank and group calls, recorded (no GPU): what Context asks of them."""

    def __init__(self):
        self.created, self.documents, self.destroyed, self.measured = 0, [], [], []

    def tasp_nccl_id(self, buf):
        return 0

    def tasp_group_create(self, n, rank, device, nccl_id, out):
        out._obj.value = 1  # a handle, so the group is destroyed with its object
        return 0

    def tasp_group_watch(self, handle, timeout):
        return 0

    def tasp_group_destroy(self, handle):
        self.destroyed.append("group")

    def tasp_rank_create(self, plan, group, timeout, out):
        self.created += 1
        out._obj.value = 100 + self.created
        return 0

    def tasp_rank_saved_bytes(self, handle, out):
        out._obj.value = 0
        return 0

    def tasp_rank_documents(self, handle, offsets, count):
        self.documents.append(list(offsets)[:count])
        return 0

    def tasp_rank_destroy(self, handle):
        self.destroyed.append("rank")

    def tasp_group_measure_fabric(self, handle, topology, options, path, said):
        """As the library: a profile fitted to the steps (here the shipped socket one, renamed) written to `path`."""
        self.measured.append((topology.decode(), json.loads(options.decode())))
        text = (SOURCE / "topologies/h200x2-socket.profile.yaml").read_text()
        name = text.split("name:", 1)[1].split("\n", 1)[0].strip().strip('"')
        with open(path.decode(), "w") as f:
            f.write(text.replace(name, name + " refitted to the fabric now", 1))
        self.said = ctypes.create_string_buffer(json.dumps(
            {"profile": name + " refitted to the fabric now", "path": path.decode(), "steps": 36, "seconds": 20.0,
             "now_over_profile": {"median": 1.1, "min": 0.9, "max": 1.3}}).encode())
        said._obj.value = self.said.value
        return 0

    def tasp_rank_device_bytes(self, handle, out):
        out._obj.value = 1000
        return 0


def test_documents_share_one_rank_per_shape(one_process_group, monkeypatch):
    """Packed documents under a token order that ignores them: one plan and rank per shape, re-masked per call, a
    backward's call re-masked for its forward's documents after other calls came between; a window, or the causal
    default layout (zigzag-docs, which follows documents), keeps a plan per document set."""
    from tasp.torch import context
    fake = _FakeLib()
    monkeypatch.setattr(context, "lib", fake)
    q, k = torch.empty(1, 64, 4, 64, dtype=torch.bfloat16), torch.empty(1, 64, 2, 64, dtype=torch.bfloat16)
    ctx = tt.Context(layout="contiguous")
    a = ctx._rank_for(q, k, True, None, [0, 10, 64])
    b = ctx._rank_for(q, k, True, None, torch.tensor([0, 30, 64]))
    none = ctx._rank_for(q, k, True, None, None)
    assert a.rank is b.rank is none.rank and fake.created == 1 and len(ctx._ranks) == 1
    assert ctx._rank_for(q, k, True, None, [0, 10, 64]) is a  # the same documents: the same view
    for view in (a, a, b, a, none):  # forward a, backward a, forward b, backward a again, then one sequence
        view.handle
    assert fake.documents == [[0, 10, 64], [0, 30, 64], [0, 10, 64], []]
    with pytest.raises(ValueError, match="cu_seqlens:"):
        ctx._rank_for(q, k, True, None, [0, 40, 30, 64])
    ctx._rank_for(q, k, True, (16, 0), [0, 10, 64]), ctx._rank_for(q, k, True, (16, 0), [0, 30, 64])
    assert fake.created == 3  # a window prunes its plan: one per document set
    zz = tt.Context()  # causal default: zigzag-docs
    zz._rank_for(q, k, True, None, [0, 10, 64]), zz._rank_for(q, k, True, None, [0, 30, 64])
    assert fake.created == 5 and len(fake.documents) == 4
    assert ctx.device_bytes() == 3 * 1000  # its three plans' ranks (the other context's are its own)


def test_deterministic_reaches_the_plan(one_process_group):
    """Context(deterministic=True) asks its plans' ranks for a dQ bit-identical run to run (the plan's option, which
    tasp_rank_create reads); the C side refuses a non-boolean, naming the option."""
    import tasp
    ctx = tt.Context(deterministic=True)
    opts = ctx._options(True, False)
    assert opts["deterministic"] is True and "deterministic" not in tt.Context()._options(True, False)
    assert tasp.Plan("complete:2", "ring", "B=1,S=64,H=2,D=64,causal", **opts).info["deterministic"] is True
    assert tasp.Plan("complete:2", "ring", "B=1,S=64,H=2,D=64").info["deterministic"] is False
    with pytest.raises(ValueError, match="options.deterministic"):
        tasp.Plan("complete:2", "ring", "B=1,S=64,H=2,D=64", deterministic="yes")


def test_collectives_reach_the_plan(one_process_group):
    """Context(collectives=...) asks an allgather plan's ranks for NCCL collectives (True), or for what the profile
    times faster ("auto", the default: over sockets collectives, on NVLink between 2 GPUs send/recv); other schemes' steps are never collectives; the C side refuses another value, naming the option."""
    import os
    import tasp
    src = os.path.join(os.path.dirname(__file__), "..", "..", "topologies")
    w = "B=1,S=8192,H=32,D=128,causal"
    assert "collectives" not in tt.Context()._options(True, False)
    assert tt.Context(collectives=False)._options(True, False)["collectives"] is False
    assert tasp.Plan("complete:2", "allgather", w, **tt.Context(collectives=True)._options(True, False)).info["collectives"]
    assert not tasp.Plan("complete:2", "ring", w, collectives=True).info["collectives"]
    assert not tasp.Plan("complete:2", "allgather", w).info["collectives"]
    assert not tasp.Plan("complete:2", "allgather", w, collectives="auto").info["collectives"]
    sock = dict(profile=os.path.join(src, "h100x2-socket.profile.yaml"), collectives="auto")
    assert tasp.Plan(os.path.join(src, "h100x2-socket.yaml"), "allgather", w, **sock).info["collectives"]
    assert tasp.Plan(os.path.join(src, "h100x2-socket.yaml"), "allgather", w, profile=sock["profile"]).info["collectives"]
    assert not tasp.Plan(os.path.join(src, "h100x2-socket.yaml"), "allgather", w, profile=sock["profile"],
                         collectives=False).info["collectives"]
    with pytest.raises(ValueError, match="options.collectives"):
        tasp.Plan("complete:2", "allgather", w, collectives="yes")


def test_candidates_are_what_auto_chooses_among(one_process_group):
    """Context(candidates=...): auto's schemes (the plan option `schemes`), zigzag kept to causal zigzag layouts; with a
    head-parallel candidate, packed documents get a plan per document set (a head-parallel rank is not re-masked)."""
    ctx = tt.Context(candidates=["allgather", "zigzag", "ulysses"])
    assert ctx._options(True, False)["schemes"] == "allgather,zigzag,ulysses"
    assert ctx._options(False, False)["schemes"] == "allgather,ulysses"
    assert tt.Context()._options(True, False)["schemes"] == "ring,zigzag,allgather,hamilton"
    assert not tt.Context(layout="zigzag", candidates=["ulysses"])._remaskable(True, None)
    assert tt.Context(layout="zigzag")._remaskable(True, None)


def test_layout_plans_are_kept(one_process_group):
    """The token order's plan is made once per (S, causal, documents) and kept (shard and unshard ask it every call)."""
    ctx = tt.Context()
    x = torch.randn(1, 64, 2)
    ctx.shard(x, 1, causal=True), ctx.shard(x, 1, causal=True, cu_seqlens=[0, 10, 64])
    first = list(ctx._layouts.values())
    ctx.shard(x, 1, causal=True), ctx.shard(x, 1, causal=True, cu_seqlens=[0, 10, 64])
    assert len(ctx._layouts) == 2 and all(a is b for a, b in zip(first, ctx._layouts.values()))


def test_a_dropped_context_frees_its_ranks_then_its_group(one_process_group, monkeypatch):
    """Ranks, their document views and the group form no reference cycle: dropping the Context frees every rank and
    then the group at once, without the garbage collector (which finalises a cycle in an order of its own; a group
    destroyed before its rank crashed the process on GPUs, 2026-11-26; the C library now tolerates either order)."""
    import gc
    from tasp.torch import context
    fake = _FakeLib()
    monkeypatch.setattr(context, "lib", fake)
    q, k = torch.empty(1, 64, 4, 64, dtype=torch.bfloat16), torch.empty(1, 64, 2, 64, dtype=torch.bfloat16)
    gc.disable()
    try:
        ctx = tt.Context(layout="contiguous", max_plans=1)
        ctx._rank_for(q, k, True, None, [0, 10, 64]).handle, ctx._rank_for(q, k, False, None, [0, 30, 64]).handle
        assert fake.destroyed == ["rank"]  # the first shape's rank, evicted with its view (max_plans=1)
        assert len(ctx._views) == 1
        del ctx
        assert fake.destroyed == ["rank", "rank", "group"]
    finally:
        gc.enable()


def test_close_frees_plans_then_the_group_and_refuses_later_calls(one_process_group, monkeypatch):
    """Context.close() (also as a `with` block's end) frees its plans' ranks and then its group at once; a later call
    is a ValueError naming ctx."""
    from tasp.torch import context
    fake = _FakeLib()
    monkeypatch.setattr(context, "lib", fake)
    q, k = torch.empty(1, 64, 4, 64, dtype=torch.bfloat16), torch.empty(1, 64, 2, 64, dtype=torch.bfloat16)
    with tt.Context(layout="contiguous") as ctx:
        ctx._rank_for(q, k, True, None, [0, 10, 64]).handle, ctx._rank_for(q, k, False, None, None)
        assert fake.destroyed == []
    assert fake.destroyed == ["rank", "rank", "group"]
    with pytest.raises(ValueError, match="ctx: this Context was closed"):
        ctx._rank_for(q, k, True, None, None)


def test_measure_fabric_fits_the_profile_every_plan_reads(one_process_group, monkeypatch):
    """Context(measure_fabric=True): the group measures its fabric once, before its first plan, with the context's
    profile as the base; every plan then reads the fitted profile, and `fabric` says what was measured. Without it the
    group is not measured and plans read the profile given."""
    from tasp.torch import context
    fake = _FakeLib()
    monkeypatch.setattr(context, "lib", fake)
    q, k = torch.empty(1, 64, 4, 64, dtype=torch.bfloat16), torch.empty(1, 64, 2, 64, dtype=torch.bfloat16)
    base = str(SOURCE / "topologies/h200x2-shm.profile.yaml")
    ctx = tt.Context(layout="contiguous", profile=base, measure_fabric=True)
    assert ctx.fabric is None
    a = ctx._rank_for(q, k, False, None, None)
    assert fake.measured == [("complete:1", {"profile": base, "timeout_s": 600})]
    assert ctx.fabric["now_over_profile"]["median"] == 1.1 and ctx.fabric["steps"] == 36
    assert a.plan.info["profile"].endswith("refitted to the fabric now")
    b = ctx._rank_for(q, k, True, None, None)  # another shape: the same fitted profile, measured once
    assert len(fake.measured) == 1 and b.plan.info["profile"] == a.plan.info["profile"]
    plain = tt.Context(layout="contiguous", profile=base)
    assert "refitted" not in plain._rank_for(q, k, False, None, None).plan.info["profile"]
    assert len(fake.measured) == 1 and plain.fabric is None


def test_gather_pieces_reach_the_plan(one_process_group):
    """Context(gather_pieces=P) plans allgather in P pieces a rank; None (the default) leaves the count to the
    simulator, which over the 2x H200 socket fabric's profile cuts qwen3_14b in 8 gathered in steps of 4, 2, 1, 1 and
    keeps 1 through host memory (both as measured, docs/measurements/executor.md)."""
    import os
    import tasp
    src = os.path.join(os.path.dirname(__file__), "..", "..", "topologies")
    w = "B=4,S=16384,H=40,Hkv=8,D=128,causal"
    assert "gather_pieces" not in tt.Context()._options(True, False)
    opts = tt.Context(gather_pieces=3)._options(True, False)
    assert tasp.Plan("complete:2", "allgather", w, **opts).info["pieces_per_rank"] == 3
    opts = tt.Context(gather_steps=[3, 1])._options(True, False)
    assert opts["gather_steps"] == [3, 1]
    info = tasp.Plan("complete:2", "allgather", w, **opts).info
    assert (info["pieces_per_rank"], info["gather_steps"]) == (4, [3, 1])
    for fabric, want in (("socket", 8), ("shm", 1)):
        t = os.path.join(src, f"h200x2-{fabric}.yaml")
        plan = tasp.Plan(t, "allgather", w, profile=os.path.join(src, f"h200x2-{fabric}.profile.yaml"))
        assert plan.info["pieces_per_rank"] == want, (fabric, plan.info["detail"])
        assert plan.info["gather_steps"] == ([4, 2, 1, 1] if fabric == "socket" else []), plan.info["detail"]
        assert "gather pieces" in plan.info["detail"]


def _option_reaches_the_plan(option, field, label):
    """Plans of B=1 S=8192 H=32 causal allgather with Context(option=True) on complete:2, and with the default and
    option=False through host memory's profile: `field` (the plan's info) true in the first two, false in the last,
    whose simulator tried nothing `label`. Returns the three plans' info."""
    import os
    import tasp
    src = os.path.join(os.path.dirname(__file__), "..", "..", "topologies")
    w = "B=1,S=8192,H=32,D=128,causal"
    assert option not in tt.Context()._options(True, False)
    asked = tasp.Plan("complete:2", "allgather", w, **tt.Context(**{option: True})._options(True, False)).info
    assert asked[field], asked
    shm = dict(profile=os.path.join(src, "h200x2-shm.profile.yaml"))
    t = os.path.join(src, "h200x2-shm.yaml")
    chosen = tasp.Plan(t, "allgather", w, **tt.Context()._options(True, False), **shm).info
    assert chosen[field], chosen["detail"]
    declined = tasp.Plan(t, "allgather", w, **tt.Context(**{option: False})._options(True, False), **shm).info
    assert not declined[field] and label not in declined["detail"], declined["detail"]
    return asked, chosen, declined


def test_prune_plain_reaches_the_plan(one_process_group):
    """Context(prune_plain=...) reaches the plan: True prunes allgather for the causal mask (pieces by chunk), False
    never does; None (the default) leaves it to the simulator, which through host memory's profile prunes the MHA
    row B=1 S=8192 H=32 (measured 0.82x the whole exchange's time, docs/measurements/executor.md)."""
    asked, _, _ = _option_reaches_the_plan("prune_plain", "pruned", "pruned")
    assert asked["pieces_by_chunk"], asked


def test_move_queries_reaches_the_plan(one_process_group):
    """Context(move_queries=...) reaches the plan: True computes rank 0's late chunk's queries at rank 1, False never
    does; None (the default) leaves it to the simulator, which through host memory's profile moves them at B=1 S=8192
    H=32 (measured 0.92-0.94x pruning's time, docs/measurements/executor.md) and on NVLink's does not."""
    import tasp
    x = torch.randn(1, 64, 2, 8)  # the token order is the plan's alike (its layout plan asks no moves of a ring)
    assert torch.equal(tt.Context(move_queries=True).shard(x, 1, causal=True), tt.Context().shard(x, 1, causal=True))
    asked, _, _ = _option_reaches_the_plan("move_queries", "queries_moved", "queries moved")
    assert asked["pruned"], asked
    w = "B=1,S=8192,H=32,D=128,causal"
    assert not tasp.Plan("complete:2", "allgather", w, **tt.Context()._options(True, False)).info["queries_moved"]
