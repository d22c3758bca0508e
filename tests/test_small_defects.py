"""Issue 10's smaller defects, one test each (the random analytic-vs-tracer check is in
test_builder_tracer_random.py)."""

from __future__ import annotations

import pytest

from gpuplan.errors import InputError
from gpuplan.estimate.inference import InferConfig, infer_memory
from gpuplan.ops.transformer import Impl
from gpuplan.specs import get_device, get_model
from gpuplan.specs.cluster import default_cluster


def test_fp32_inference_counts_every_weight_at_four_bytes():
    m = get_model("llama-3-8b")
    r = infer_memory(m, get_device("h100"), InferConfig(batch=1, context=128,
                                                        weight_dtype="fp32"))
    # unquantized fp32: all parameters (embedding and LM head included) at 4 bytes
    assert r.per_gpu["weights"] == int(m.params() * 4)
    assert r.per_gpu["weights"] / 1e9 == pytest.approx(32.1, abs=0.05)
    # quantized weights keep embedding and head at 16 bits (unchanged behaviour)
    q = infer_memory(m, get_device("h100"), InferConfig(batch=1, context=128,
                                                        weight_dtype="int8"))
    assert q.per_gpu["weights"] > m.params() * 1.0


def test_job_smaller_than_a_node():
    c = default_cluster(get_device("h100"), 4, gpus_per_node=8)
    assert c.gpus == 4 and c.nodes == 1 and c.gpus_per_node == 4
    with pytest.raises(InputError, match="gpus-per-node"):
        default_cluster(get_device("h100"), 12, gpus_per_node=8)


def test_train_four_gpus_on_an_eight_gpu_node_cli(capsys):
    import json

    from gpuplan.cli.main import main

    assert main(["train", "gpt2", "--gpus", "4", "--gpus-per-node", "8", "--seq-len", "1024",
                 "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["gpus"] == 4 and r["layout"]["dp"] == 4


@pytest.mark.parametrize("field", ["dtype", "matmul_dtype", "weight_dtype", "kv_dtype",
                                   "grad_dtype"])
def test_unknown_dtype_is_a_clear_input_error(field):
    with pytest.raises(InputError) as e:
        Impl(**{field: "fp12"})
    assert e.value.field == field and "fp12" in str(e.value) and "bf16" in str(e.value)
