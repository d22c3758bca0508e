"""Expert tensor parallelism (--etp): the routed experts' own layout under MoE parallel folding
(Megatron-Core expert_tensor_parallel_size; Liu et al. 2025, arXiv:2504.14960)."""

from __future__ import annotations

import json

import pytest

from gpuplan.cli.main import main
from gpuplan.errors import InputError
from gpuplan.estimate.memory import train_memory
from gpuplan.estimate.partition import stages
from gpuplan.estimate.training import step_time
from gpuplan.ops.impl import local_sizes, train_impl
from gpuplan.specs.catalog import get_device, get_model
from gpuplan.specs.cluster import default_cluster
from gpuplan.specs.workload import TrainConfig, check_layout

MIXTRAL = "mixtral-8x7b"


def _cfg(**kw) -> TrainConfig:
    base = dict(micro_batch=1, seq_len=4096, global_batch=64, tp=4, dp=4, ep=4, sp=True,
                zero=1, precision="bf16-mixed")
    return TrainConfig(**{**base, **kw})


def test_unset_etp_is_tp_and_keeps_the_old_split():
    m = get_model(MIXTRAL)
    cfg = _cfg()
    assert cfg.expert_tp == 4
    assert stages(m, 4, 1, 4) == stages(m, 4, 1, 4, None) == stages(m, 4, 1, 4, 4)


def test_routed_experts_per_gpu_follow_etp_not_tp():
    """E/ep experts, each split etp ways: with etp 1 a GPU holds tp times the expert
    parameters it holds with etp = tp; attention and norms do not change."""
    m = get_model(MIXTRAL)
    folded, default = stages(m, 4, 1, 4, 1)[0], stages(m, 4, 1, 4)[0]
    per_expert = m.mlp_params(m.expert_size)
    assert folded.expert_params == pytest.approx(m.num_moe_layers * m.num_experts / 4 * per_expert)
    assert folded.expert_params == pytest.approx(4 * default.expert_params)
    assert folded.params - folded.expert_params == pytest.approx(
        default.params - default.expert_params)


def test_expert_states_shard_over_the_expert_data_parallel_group():
    """ZeRO-1 shards the optimizer states of dense parameters over dp x cp and of the routed
    experts over tp x dp x cp / (ep x etp) only."""
    m, d = get_model(MIXTRAL), get_device("h100")
    for etp in (1, 4):
        cfg = _cfg(etp=etp)
        st = stages(m, 4, 1, 4, etp)[0]
        r = train_memory(m, d, cfg)
        edp = 4 * 4 // (4 * etp)
        assert cfg.expert_shard_group == edp
        dense = st.params - st.expert_params
        expect = 12 * (dense / 4 + st.expert_params / edp)  # adamw: fp32 master, m, v
        steps = r.per_gpu["optimizer"] - expect
        assert 0 <= steps < 1e6  # plus the per-tensor step counters
    # etp = tp: one expert-DP rank per expert shard (dp 4 / ep 4): experts not sharded at all
    assert _cfg().expert_shard_group == 1


def test_folded_experts_see_only_their_sequence_shard():
    """With etp 1 and sequence parallelism each rank's experts get its own s/tp tokens: the
    dispatch keeps tp times fewer rows than with etp = tp (tokens gathered across TP)."""
    m, d = get_model(MIXTRAL), get_device("h100")
    saved = {}
    for etp in (1, 4):
        cfg = _cfg(etp=etp)
        loc = local_sizes(m, train_impl(cfg, d.kind), cfg.seq_len)
        assert loc.expert_ff == -(-m.expert_size // etp)
        assert loc.shared_expert_ff == -(-m.expert_size // 4)
        saved[etp] = loc.expert_rep
    assert saved == {1: 0.25, 4: 1.0}


def test_folded_experts_never_run_all_tokens_on_every_tp_rank():
    """Without sequence parallelism the tokens are replicated across TP, yet no stack runs each
    rank's experts on all of them (Megatron-Core requires SP for MoE with TP; DeepSpeed-MoE
    drops the duplicates): the step's hardware FLOPs per GPU are those of the SP layout, but
    for the norms and residuals SP shards (well under 1 %)."""
    m, d = get_model(MIXTRAL), get_device("h100")
    cl = default_cluster(d, 16, 8)
    for etp in (1, 2, 4):
        off = local_sizes(m, train_impl(_cfg(etp=etp, sp=False), d.kind), 4096)
        on = local_sizes(m, train_impl(_cfg(etp=etp), d.kind), 4096)
        assert off.expert_rep == on.expert_rep == etp / 4
        assert off.rep == 1.0 and on.rep == 0.25

    off_flops, on_flops = (step_time(m, cl, _cfg(etp=1, sp=sp)).hardware_flops_per_step
                           for sp in (False, True))
    assert off_flops == pytest.approx(on_flops, rel=0.01)


def test_folded_experts_move_the_expert_group_inside_the_node():
    """EP ranks stride etp: EP 8 at etp 1 fills one 8-GPU node, at etp = tp 4 it spans four."""
    m = get_model(MIXTRAL)
    cl = default_cluster(get_device("h100"), 32, 8)
    calls = {}
    for etp in (1, 4):
        res = step_time(m, cl, _cfg(dp=8, ep=8, etp=etp, global_batch=64))
        calls[etp] = next(c for c in res.collectives
                          if c["what"] == "expert parallel dispatch/combine")
    assert calls[1]["bytes"] == calls[4]["bytes"]
    assert calls[1]["link"] != calls[4]["link"]
    assert calls[1]["time_s"] < calls[4]["time_s"]


@pytest.mark.parametrize("kw, field", [
    (dict(dp=2, ep=4, etp=4), "etp"),   # ep x etp = 16 does not divide tp x dp = 8
    (dict(dp=2, ep=4), "ep"),           # unset etp: ep must divide dp x cp
])
def test_layout_rules_name_the_field(kw, field):
    cfg = _cfg(**kw)
    with pytest.raises(InputError) as e:
        check_layout(cfg, cfg.gpus, get_model(MIXTRAL))
    assert e.value.field == field


def test_ep_larger_than_dp_is_statable_with_folding():
    cfg = _cfg(dp=2, ep=8, etp=1)  # ep 8 > dp 2; ep x etp = 8 divides tp x dp = 8
    check_layout(cfg, cfg.gpus, get_model(MIXTRAL))


def test_dense_model_refuses_etp_above_one():
    cfg = TrainConfig(micro_batch=1, seq_len=2048, tp=2, dp=2, etp=2)
    with pytest.raises(InputError) as e:
        check_layout(cfg, 4, get_model("llama-3-8b"))
    assert e.value.field == "etp"


def test_cli_states_etp_and_reports_it(capsys):
    job = ["train", MIXTRAL, "--gpu", "h100", "--gpus", "16", "--tp", "4", "--ep",
           "4", "--sequence-parallel", "--global-batch", "64", "--seq-len", "4096", "--json"]
    assert main([*job, "--etp", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["memory"]["assumptions"]["parallel"]["etp"] == 1
    assert main(["train", MIXTRAL, "--gpu", "h100", "--gpus", "8", "--tp", "4",
                 "--ep", "4", "--etp", "4", "--json"]) != 0
    err = capsys.readouterr()
    assert "etp" in err.err + err.out and "Traceback" not in err.err + err.out
