"""python -m tasp.bench without GPUs: the configurations it lists and how a shape is made from a config and the
overrides; bad arguments end with a message and status 2 (the runs themselves need GPUs: tools/gpu/python.sh)."""
import pytest

import tasp
from tasp import bench


def test_list_configs(capsys):
    assert bench.main(["--list-configs"]) == 0
    out = capsys.readouterr().out
    for name in ("medium", "qwen3_14b", "llama3-8b"):
        assert name in out
    assert len(out.splitlines()) == len(tasp.configs()) + 1


def test_shape_from_config_and_overrides():
    shape = lambda *argv: bench.shape_of(bench.parse_args(list(argv)))
    assert shape("--config", "medium") == (4, 8192, 24, 24, 128, True, None, "bf16")
    assert shape("--config", "qwen3_14b") == (4, 16384, 40, 8, 128, True, None, "bf16")
    assert shape("--config", "medium", "--seqlen", "4096", "--full") == (4, 4096, 24, 24, 128, False, None, "bf16")
    assert shape("--config", "small_window")[6] == (512, 0)
    assert shape("--seqlen", "2048", "--nheads", "8", "--head-dim", "64", "--nheads-kv", "2", "--causal",
                 "--dtype", "fp16") == (4, 2048, 8, 2, 64, True, None, "fp16")


def test_packed_documents():
    docs = lambda *argv: bench.documents_of(a := bench.parse_args(list(argv)), *bench.shape_of(a)[:2])
    assert docs("--config", "medium") == (4, 8192, None)
    # nnscaler's varlen benchmark's cuts, per sequence of the batch, packed into one.
    assert docs("--config", "small", "--varlen") == (1, 16384, (0, 512, 1024, 2048, 4096, 4608, 5120, 6144, 8192, 8704,
                                                                 9216, 10240, 12288, 12800, 13312, 14336, 16384))
    assert docs("--config", "tiny", "--cu-seqlens", "0,100,1000") == (1, 1000, (0, 100, 1000))


@pytest.mark.parametrize("argv,names", [
    (["--config", "tiny", "--cu-seqlens", "0,100,100"], "--cu-seqlens"),
    (["--config", "tiny", "--cu-seqlens", "5,100"], "--cu-seqlens"),
    (["--config", "tiny", "--cu-seqlens", "0,x"], "--cu-seqlens"),
    (["--config", "nosuch"], "--config"),
    (["--seqlen", "2048"], "--config NAME, or"),
    (["--config", "medium", "--nheads-kv", "5"], "--nheads-kv"),
    (["--config", "medium", "--window", "5"], "--window"),
])
def test_bad_arguments(argv, names, capsys):
    assert bench.main(argv) == 2
    assert names in capsys.readouterr().err


def test_needs_torchrun(capsys, monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    assert bench.main(["--config", "tiny"]) == 2
    assert "torchrun" in capsys.readouterr().err


def test_negative_counts_are_refused():
    with pytest.raises(SystemExit):
        bench.parse_args(["--config", "tiny", "--timing-runs", "0"])


def test_the_environment_names_the_fabric_and_the_switches():
    env = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_SOCKET_IFNAME": "lo", "TASP_OWN_KV_STAGED": "1",
           "PATH": "/bin"}
    e = bench.run_environment(env)
    assert e["fabric"] == "socket"
    assert e["variables"] == {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_SOCKET_IFNAME": "lo",
                              "TASP_OWN_KV_STAGED": "1"}
    assert bench.run_environment({"NCCL_P2P_DISABLE": "1"})["fabric"] == "shm"
    assert bench.run_environment({"NCCL_P2P_DISABLE": "0", "NCCL_SHM_DISABLE": "1"})["fabric"] == "default"
    assert bench.run_environment({}) == {"fabric": "default", "variables": {}}


def test_collectives_and_profile_options():
    a = bench.parse_args(["--config", "medium", "--collectives", "auto", "--profile", "x.yaml"])
    assert a.collectives == "auto" and a.profile == "x.yaml"
    assert bench.parse_args(["--config", "medium"]).collectives == "auto"
    with pytest.raises(SystemExit):
        bench.parse_args(["--config", "medium", "--collectives", "yes"])



@pytest.mark.parametrize("flag", ["prune-plain", "move-queries"])
def test_auto_true_false_options(flag):
    name = flag.replace("-", "_")
    assert getattr(bench.parse_args(["--config", "medium"]), name) == "auto"
    assert getattr(bench.parse_args(["--config", "medium", "--" + flag, "true"]), name) == "true"
    with pytest.raises(SystemExit):
        bench.parse_args(["--config", "medium", "--" + flag, "yes"])
