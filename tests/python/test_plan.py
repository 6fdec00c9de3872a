"""tasp.Plan: what a plan says about itself, and shard/unshard as the plan lays tokens out."""
import pytest
import torch

import tasp


def test_auto_says_what_it_tried():
    p = tasp.Plan("complete:4", "auto", "B=1,S=4096,H=32,Hkv=8,D=128,causal")
    assert p.info["scheme"] in ("ring", "zigzag", "allgather", "hamilton", "ulysses")
    assert p.info["detail"].startswith("auto: fastest simulated")
    assert p.info["predicted_us"] > 0 and p.info["gpus"] == 4



def test_named_plans_say_what_they_chose():
    """A named scheme's choices made by simulating are in its detail: Ulysses' head groups, allgather's pieces."""
    u = tasp.Plan("complete:4", "ulysses", "B=1,S=8192,H=32,D=128,causal")
    assert u.info["detail"].startswith("head groups "), u.info["detail"]
    a = tasp.Plan("complete:4", "allgather", "B=1,S=8192,H=32,D=128,causal")
    assert a.info["detail"].startswith("gather pieces "), a.info["detail"]
    assert tasp.Plan("complete:4", "allgather", "B=1,S=8192,H=32,D=128,causal", gather_pieces=2).info["detail"] == ""


@pytest.mark.parametrize("scheme,workload,options", [
    ("zigzag", "B=1,S=64,H=4,D=8,causal", {}), ("ring", "B=1,S=60,H=4,D=8", {}),
    ("ulysses", "B=1,S=64,H=8,D=8,causal", {}), ("usp", "B=1,S=64,H=8,D=8,causal", {"ulysses": 2}),
    ("allgather", "B=1,S=64,H=4,D=8,causal,docs=10+30+24", {}),
])
def test_shard_unshard_round_trip(scheme, workload, options):
    p = tasp.Plan("complete:4", scheme, workload, **options)
    S = int(workload.split("S=")[1].split(",")[0])
    x = torch.randn(2, S, 3)
    shards = [p.shard(x, gpu) for gpu in range(4)]
    assert sum(s.shape[1] for s in shards) == S
    torch.testing.assert_close(p.unshard(shards), x, rtol=0, atol=0)
    covered = sorted(t for gpu in range(4) for b, e in p.tokens(gpu) for t in range(b, e))
    assert covered == list(range(S))


def test_zigzag_pairs_chunks_from_both_ends():
    p = tasp.Plan("complete:2", "zigzag", "B=1,S=16,H=2,D=8,causal")
    assert p.tokens(0) == [(0, 4), (12, 16)] and p.tokens(1) == [(4, 8), (8, 12)]


def test_a_given_layout_holds_for_auto_too():
    for scheme in ("auto", "allgather"):
        p = tasp.Plan("complete:4", scheme, "B=1,S=4096,H=32,Hkv=8,D=128,causal,docs=1000+3096", layout="contiguous")
        assert p.info["layout"] == "contiguous", scheme


def test_zigzag_refuses_a_contiguous_layout():
    """A caller holding contiguous shards must not get a plan for zigzag ones (the scheme's layout is its name)."""
    with pytest.raises(ValueError, match="zigzag"):
        tasp.Plan("complete:2", "zigzag", "B=1,S=64,H=2,D=8,causal", layout="contiguous")


@pytest.mark.parametrize("scheme,options", [("ulysses", {}), ("usp", {"ulysses": 2, "inner": "ring"})])
@pytest.mark.parametrize("causal", [False, True])
def test_head_parallel_gpus_hold_what_token_parallel_ones_do(scheme, options, causal):
    """One sharding serves both families: each GPU of a head-parallel plan holds the tokens a token-parallel plan of as
    many ranks gives it (zigzag under a causal mask, contiguous without), so a model sharded once can switch."""
    w = "B=1,S=64,H=8,D=8" + (",causal" if causal else "")
    heads = tasp.Plan("complete:4", scheme, w, **options)
    tokens = tasp.Plan("complete:4", "zigzag" if causal else "ring", w)
    assert [heads.tokens(g) for g in range(4)] == [tokens.tokens(g) for g in range(4)]
