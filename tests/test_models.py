"""Model presets: exact parameter counts, equal to what Hugging Face `transformers` instantiates.

Provenance of the expected numbers
----------------------------------
* Given by the project brief (each also reproduced with transformers 5.24, meta device):
  llama-2-7b/13b/70b, llama-3-8b, llama-3-70b, llama-3.1-405b, mistral-7b, mixtral-8x7b,
  qwen2.5-7b, gpt2, gpt2-xl; Gemma 2 9B (9,241,705,984) as published by HF.
* All others: obtained by building the real transformers model from the equivalent config.json
  values on the meta device and summing `p.numel()` over `model.parameters()`
  (`with torch.device("meta"): AutoModelForCausalLM.from_config(cfg)`; `BertForMaskedLM` for
  BERT), transformers 5.24.0, torch 2.13. Cross-checks: phi-3-mini equals the 3,821,079,552 that
  keras-hub lists; deepseek-v3 is the published "671B" (MTP module not counted, as HF does not
  instantiate it); gemma-2-27b, qwen2.5-72b, llama-3.2-1b/3b match their model cards (27.2B,
  72.7B, 1.24B, 3.21B).
"""

from __future__ import annotations

import pytest

from gpuplan.specs.catalog import get_model, model_presets
from gpuplan.specs.model import ModelSpec

EXPECTED_PARAMS: dict[str, int] = {
    # GPT-2 family (GPT2LMHeadModel, tied head)
    "gpt2": 124_439_808,
    "gpt2-medium": 354_823_168,  # HF meta build
    "gpt2-large": 774_030_080,  # HF meta build
    "gpt2-xl": 1_557_611_200,
    # GPT-3 175B sizes (Brown et al. 2020 Table 2.1) in GPT2LMHeadModel; HF meta build
    "gpt3-175b": 174_604_259_328,
    # Llama
    "llama-2-7b": 6_738_415_616,
    "llama-2-13b": 13_015_864_320,
    "llama-2-70b": 68_976_648_192,
    "llama-3-8b": 8_030_261_248,
    "llama-3-70b": 70_553_706_496,
    "llama-3.1-405b": 405_853_388_800,
    "llama-3.2-1b": 1_235_814_400,  # HF meta build (tied, head_dim 64)
    "llama-3.2-3b": 3_212_749_824,  # HF meta build (tied)
    # Mistral
    "mistral-7b": 7_241_732_096,
    "mixtral-8x7b": 46_702_792_704,
    # Qwen2.5 (q/k/v bias)
    "qwen2.5-0.5b": 494_032_768,  # HF meta build (tied)
    "qwen2.5-7b": 7_615_616_512,
    "qwen2.5-72b": 72_706_203_648,  # HF meta build
    # DeepSeek-V3 (MLA + MoE); HF meta build of DeepseekV3ForCausalLM
    "deepseek-v3": 671_026_404_352,
    # Gemma 2 (4 norms per layer, head_dim 256/128, tied)
    "gemma-2-9b": 9_241_705_984,
    "gemma-2-27b": 27_227_128_320,  # HF meta build
    "opt-13b": 12_853_473_280,  # HF meta build (OPTForCausalLM; 2 extra position rows)
    # Phi-3 mini 4k (fused qkv / gate_up in HF; same count)
    "phi-3-mini": 3_821_079_552,  # HF meta build
    # BERT as BertForMaskedLM (no pooler, MLM head); HF meta build
    "bert-base": 109_514_298,
    "bert-large": 335_174_458,
}

# Parameters one token uses (MoE: router + top-k routed experts + shared experts; embeddings and
# LM head included).
EXPECTED_ACTIVE: dict[str, int] = {
    # 46,702,792,704 - 32 layers x (8 - 2) experts x 3 x 4096 x 14336
    "mixtral-8x7b": 12_879_925_248,
    # 671,026,404,352 - 58 MoE layers x (256 - 8) experts x 3 x 7168 x 2048
    #   = 671,026,404,352 - 633,474,121,728 (DeepSeek reports "37B activated")
    "deepseek-v3": 37_552_282_624,
}

PRESETS = {m.name: m for m in model_presets()}


@pytest.mark.parametrize("name", sorted(EXPECTED_PARAMS))
def test_preset_params_exact(name: str) -> None:
    assert get_model(name).params() == EXPECTED_PARAMS[name]


def test_every_preset_has_an_expected_count() -> None:
    assert set(PRESETS) == set(EXPECTED_PARAMS)


@pytest.mark.parametrize("name", sorted(EXPECTED_ACTIVE))
def test_moe_active_params(name: str) -> None:
    spec = get_model(name)
    assert spec.is_moe
    assert spec.active_params() == EXPECTED_ACTIVE[name]


def test_deepseek_v3_active_derivation() -> None:
    spec = get_model("deepseek-v3")
    expert = 3 * 7168 * 2048  # gate, up, down of one routed expert
    assert spec.num_moe_layers == 58
    assert spec.params() - spec.active_params() == 58 * (256 - 8) * expert
    assert round(spec.params() / 1e9) == 671
    assert 37e9 < spec.active_params() < 38e9


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_dense_active_equals_total(name: str) -> None:
    spec = PRESETS[name]
    if not spec.is_moe:
        assert spec.active_params() == spec.params()


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_breakdown_sums_to_params(name: str) -> None:
    spec = PRESETS[name]
    breakdown = spec.params_breakdown()
    assert sum(breakdown.values()) == spec.params()
    assert all(v >= 0 for v in breakdown.values())
    assert spec.non_embedding_params() == spec.params() - breakdown["embedding"]


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_provenance(name: str) -> None:
    spec = PRESETS[name]
    assert spec.source and spec.source_url and spec.source_date
    assert spec.source_url.startswith("https://")


def test_preset_file_names_match_names() -> None:
    from importlib import resources

    folder = resources.files("gpuplan") / "catalog" / "models"
    stems = {f.name[: -len(".toml")] for f in folder.iterdir() if f.name.endswith(".toml")}
    assert stems == set(PRESETS)


def test_architecture_features() -> None:
    gemma = get_model("gemma-2-9b")
    assert gemma.norms_per_layer == 4 and gemma.head_size == 256 and gemma.tie_embeddings
    assert gemma.sliding_window == 4096 and gemma.num_sliding_layers == 21
    mistral = get_model("mistral-7b")
    assert mistral.sliding_window == 4096 and mistral.num_sliding_layers == 32
    ds = get_model("deepseek-v3")
    assert ds.is_mla and ds.head_size == 192 and ds.v_head_size == 128
    assert ds.num_dense_layers == 3 and not ds.router_bias_params
    bert = get_model("bert-base")
    assert bert.arch == "encoder" and not bert.causal and not bert.pooler and bert.mlm_head
    assert get_model("qwen2.5-7b").qkv_bias and not get_model("qwen2.5-7b").out_bias


def test_presets_are_modelspecs() -> None:
    for spec in PRESETS.values():
        assert isinstance(spec, ModelSpec)
        assert ModelSpec.model_validate(spec.model_dump()) == spec
