"""Hugging Face config.json import: parameter counts equal the real `transformers` models.

Each tiny config is written to disk from a `transformers` config class, read back with
`load_hf_config`, and `ModelSpec.params()` is compared to the parameter count of the model that
`transformers` builds from the same config on the meta device (no memory, no weights). Two
variants of every file are checked: the full `to_dict()` and a minimal one that leaves out every
key whose value equals the config class default, so that our defaults must match transformers'.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from gpuplan.errors import GpuplanError, InputError
from gpuplan.specs.catalog import get_model
from gpuplan.specs.hf_config import SUPPORTED_MODEL_TYPES, load_hf_config, spec_from_hf_dict

TINY: dict[str, Any] = {
    "vocab_size": 1000,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
}
GPT2_TINY: dict[str, Any] = {"vocab_size": 1000, "n_embd": 64, "n_layer": 2, "n_head": 4}
MLA: dict[str, Any] = {
    **TINY,
    "num_hidden_layers": 3,
    "kv_lora_rank": 16,
    "qk_nope_head_dim": 16,
    "qk_rope_head_dim": 8,
    "v_head_dim": 16,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "n_group": 1,
    "topk_group": 1,
    "moe_intermediate_size": 32,
    "first_k_dense_replace": 1,
}

# (case id, config class name, kwargs)
CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("gpt2", "GPT2Config", GPT2_TINY),
    ("gpt2-untied-inner-relu", "GPT2Config",
     {**GPT2_TINY, "n_inner": 100, "activation_function": "relu", "tie_word_embeddings": False,
      "n_positions": 77}),
    ("llama-mha", "LlamaConfig", TINY),
    ("llama-gqa", "LlamaConfig", {**TINY, "num_key_value_heads": 2}),
    ("llama-mqa-tied", "LlamaConfig",
     {**TINY, "num_key_value_heads": 1, "tie_word_embeddings": True}),
    ("llama-bias", "LlamaConfig", {**TINY, "attention_bias": True, "mlp_bias": True}),
    ("llama-head-dim", "LlamaConfig", {**TINY, "num_key_value_heads": 2, "head_dim": 32}),
    ("mistral", "MistralConfig", {**TINY, "num_attention_heads": 8}),
    ("mistral-no-window-mqa", "MistralConfig",
     {**TINY, "num_key_value_heads": 1, "sliding_window": None, "head_dim": 24}),
    ("mixtral", "MixtralConfig",
     {**TINY, "num_key_value_heads": 2, "num_local_experts": 4, "num_experts_per_tok": 2}),
    ("qwen2", "Qwen2Config", {**TINY, "num_key_value_heads": 2}),
    ("qwen2-tied-window", "Qwen2Config",
     {**TINY, "num_key_value_heads": 1, "tie_word_embeddings": True, "use_sliding_window": True,
      "sliding_window": 32, "max_window_layers": 0}),
    ("qwen2-moe", "Qwen2MoeConfig",
     {**TINY, "num_key_value_heads": 2, "num_experts": 4, "num_experts_per_tok": 2,
      "moe_intermediate_size": 32, "shared_expert_intermediate_size": 64}),
    ("qwen2-moe-dense-first-nobias", "Qwen2MoeConfig",
     {**TINY, "num_hidden_layers": 3, "num_key_value_heads": 4, "num_experts": 4,
      "num_experts_per_tok": 1,
      "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32,
      "mlp_only_layers": [0], "qkv_bias": False}),
    ("deepseek-v3-q-lora", "DeepseekV3Config", {**MLA, "q_lora_rank": 24}),
    ("opt", "OPTConfig",
     {"vocab_size": 1000, "hidden_size": 64, "num_hidden_layers": 2, "ffn_dim": 256,
      "num_attention_heads": 4, "max_position_embeddings": 128, "pad_token_id": 1}),
    ("opt-nobias-untied", "OPTConfig",
     {"vocab_size": 1000, "hidden_size": 64, "num_hidden_layers": 2, "ffn_dim": 128,
      "num_attention_heads": 4, "max_position_embeddings": 64, "enable_bias": False,
      "tie_word_embeddings": False, "pad_token_id": 1}),
    ("deepseek-v3-no-q-lora", "DeepseekV3Config",
     {**MLA, "q_lora_rank": None, "n_shared_experts": 2}),
    ("deepseek-v3-no-q-lora-bias", "DeepseekV3Config",
     {**MLA, "q_lora_rank": None, "attention_bias": True}),
    ("deepseek-v3-bias-tied", "DeepseekV3Config",
     {**MLA, "q_lora_rank": 24, "attention_bias": True, "tie_word_embeddings": True,
      "first_k_dense_replace": 0}),
    ("gemma", "GemmaConfig", {**TINY, "num_key_value_heads": 1, "head_dim": 32}),
    ("gemma2", "Gemma2Config",
     {**TINY, "num_hidden_layers": 4, "num_key_value_heads": 2, "head_dim": 32,
      "sliding_window": 16}),
    ("gemma2-bias-untied", "Gemma2Config",
     {**TINY, "num_key_value_heads": 4, "head_dim": 16, "attention_bias": True,
      "tie_word_embeddings": False}),
    ("phi3", "Phi3Config",
     {**TINY, "num_key_value_heads": 2, "sliding_window": 32, "pad_token_id": 0,
      "eos_token_id": 1}),
    ("qwen3", "Qwen3Config", {**TINY, "num_key_value_heads": 2}),
    ("qwen3-bias-tied-window", "Qwen3Config",
     {**TINY, "num_key_value_heads": 1, "head_dim": 24, "attention_bias": True,
      "tie_word_embeddings": True, "use_sliding_window": True, "sliding_window": 32,
      "max_window_layers": 0}),
    ("qwen3-moe", "Qwen3MoeConfig",
     {**TINY, "num_key_value_heads": 2, "num_experts": 4, "num_experts_per_tok": 2,
      "moe_intermediate_size": 32}),
    ("qwen3-moe-dense-first-head-dim", "Qwen3MoeConfig",
     {**TINY, "num_hidden_layers": 3, "num_key_value_heads": 1, "head_dim": 32,
      "num_experts": 4, "num_experts_per_tok": 1, "moe_intermediate_size": 32,
      "mlp_only_layers": [0], "attention_bias": True}),
    ("gpt-neox", "GPTNeoXConfig", {**TINY, "rotary_pct": 0.5}),
    ("gpt-neox-nobias-tied-sequential", "GPTNeoXConfig",
     {**TINY, "attention_bias": False, "tie_word_embeddings": True,
      "use_parallel_residual": False, "hidden_act": "gelu_new"}),
    ("falcon-7b-layout", "FalconConfig", {**TINY, "num_attention_heads": 8}),
    ("falcon-sequential-mha-bias", "FalconConfig",
     {**TINY, "multi_query": False, "parallel_attn": False, "bias": True,
      "ffn_hidden_size": 96, "tie_word_embeddings": False}),
    ("falcon-40b-layout", "FalconConfig",
     {**TINY, "new_decoder_architecture": True, "num_kv_heads": 2}),
    ("falcon-new-one-norm", "FalconConfig",
     {**TINY, "new_decoder_architecture": True, "num_kv_heads": 1,
      "num_ln_in_parallel_attn": 1}),
    ("gpt-bigcode", "GPTBigCodeConfig", {**GPT2_TINY, "n_positions": 64}),
    ("gpt-bigcode-mha-untied", "GPTBigCodeConfig",
     {**GPT2_TINY, "multi_query": False, "n_inner": 96, "tie_word_embeddings": False}),
    ("starcoder2", "Starcoder2Config", {**TINY, "num_key_value_heads": 2}),
    ("starcoder2-nobias-window-untied", "Starcoder2Config",
     {**TINY, "num_key_value_heads": 1, "use_bias": False, "sliding_window": 32,
      "tie_word_embeddings": False}),
    ("olmo2", "Olmo2Config", {**TINY, "num_key_value_heads": 2}),
    ("olmo2-bias-tied", "Olmo2Config",
     {**TINY, "attention_bias": True, "tie_word_embeddings": True}),
    ("olmo3", "Olmo3Config", {**TINY, "num_hidden_layers": 4, "num_key_value_heads": 2,
                              "sliding_window": 32}),
    ("phi-2-layout", "PhiConfig", TINY),
    ("phi-gqa-tied", "PhiConfig",
     {**TINY, "num_key_value_heads": 2, "tie_word_embeddings": True,
      "partial_rotary_factor": 1.0}),
    ("gptj", "GPTJConfig", {**GPT2_TINY, "rotary_dim": 8}),
    ("gptj-full-rotary-inner-tied", "GPTJConfig",
     {**GPT2_TINY, "rotary_dim": 16, "n_inner": 96, "tie_word_embeddings": True}),
    ("stablelm", "StableLmConfig", {**TINY, "num_key_value_heads": 2}),
    ("stablelm-2-12b-layout", "StableLmConfig",
     {**TINY, "num_key_value_heads": 2, "use_parallel_residual": True, "qk_layernorm": True,
      "use_qkv_bias": True}),
    ("nemotron", "NemotronConfig", {**TINY, "num_key_value_heads": 2}),
    ("nemotron-bias-head-dim", "NemotronConfig",
     {**TINY, "num_key_value_heads": 4, "head_dim": 24, "attention_bias": True,
      "mlp_bias": True}),
    ("cohere", "CohereConfig", {**TINY, "num_key_value_heads": 2}),
    ("cohere-qk-norm-bias-untied", "CohereConfig",
     {**TINY, "use_qk_norm": True, "attention_bias": True, "tie_word_embeddings": False}),
    ("olmo", "OlmoConfig", {**TINY, "num_key_value_heads": 2}),
    ("olmo-bias-tied", "OlmoConfig", {**TINY, "attention_bias": True, "tie_word_embeddings": True}),
    ("granite", "GraniteConfig",
     {**TINY, "num_key_value_heads": 2, "embedding_multiplier": 12.0,
      "residual_multiplier": 0.22, "logits_scaling": 8.0}),
    ("gemma3-text", "Gemma3TextConfig",
     {**TINY, "num_hidden_layers": 6, "num_key_value_heads": 2, "head_dim": 16,
      "sliding_window": 16}),
    ("gemma3-text-bias-untied-pattern", "Gemma3TextConfig",
     {**TINY, "num_hidden_layers": 4, "num_key_value_heads": 1, "head_dim": 32,
      "attention_bias": True, "tie_word_embeddings": False, "sliding_window_pattern": 2}),
    ("bloom", "BloomConfig", {"vocab_size": 1000, "hidden_size": 64, "n_layer": 2, "n_head": 4}),
    ("bloom-untied", "BloomConfig",
     {"vocab_size": 1000, "hidden_size": 96, "n_layer": 3, "n_head": 4,
      "tie_word_embeddings": False}),
    ("mpt", "MptConfig", {"vocab_size": 1000, "d_model": 64, "n_layers": 2, "n_heads": 4}),
    ("mpt-seq-no-alibi", "MptConfig",
     {"vocab_size": 1000, "d_model": 96, "n_layers": 3, "n_heads": 8, "max_seq_len": 128,
      "attn_config": {"alibi": False}}),
    ("bert", "BertConfig", {**TINY, "max_position_embeddings": 64}),
    ("bert-type-vocab", "BertConfig", {**TINY, "type_vocab_size": 3, "hidden_act": "relu"}),
]


def _hf_params(cls_name: str, cfg_dict: dict[str, Any]) -> list[Any]:
    """The parameter tensors of the real transformers model, built on meta."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    cfg = getattr(transformers, cls_name)(**cfg_dict)
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        if cfg.model_type == "bert":
            model = transformers.BertForMaskedLM(cfg)
        else:
            model = transformers.AutoModelForCausalLM.from_config(cfg)
    return list(model.parameters())


def _hf_count(cls_name: str, cfg_dict: dict[str, Any]) -> int:
    return int(sum(p.numel() for p in _hf_params(cls_name, cfg_dict)))


def _hf_tensor_count(cls_name: str, cfg_dict: dict[str, Any]) -> int:
    """Parameter tensors (optimizers keep a step counter per tensor)."""
    return len(_hf_params(cls_name, cfg_dict))


def _config_dicts(cls_name: str, kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(full to_dict(), minimal dict without the keys equal to the class defaults)."""
    transformers = pytest.importorskip("transformers")
    cls = getattr(transformers, cls_name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = json.loads(cls(**kwargs).to_json_string(use_diff=False))
        default = json.loads(cls().to_json_string(use_diff=False))
    minimal = {k: v for k, v in full.items() if k == "model_type" or default.get(k, object()) != v}
    return full, minimal


@pytest.mark.parametrize(("case", "cls_name", "kwargs"), CASES, ids=[c[0] for c in CASES])
def test_params_match_transformers(
    tmp_path: Path, case: str, cls_name: str, kwargs: dict[str, Any]
) -> None:
    full, minimal = _config_dicts(cls_name, kwargs)
    expected = _hf_count(cls_name, full)
    for variant, cfg in (("full", full), ("minimal", minimal)):
        path = tmp_path / variant / case / "config.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(cfg), encoding="utf-8")
        spec = load_hf_config(path)
        assert spec.name == case
        assert spec.family == full["model_type"]
        assert spec.params() == expected, (variant, spec.params_breakdown())
        assert spec.param_tensors() == _hf_tensor_count(cls_name, full)
        assert sum(spec.params_breakdown().values()) == spec.params()


def test_every_supported_type_is_tested() -> None:
    transformers = pytest.importorskip("transformers")
    tested = {getattr(transformers, c[1]).model_type for c in CASES}
    assert tested == set(SUPPORTED_MODEL_TYPES)


def test_features_are_mapped() -> None:
    base = {"model_type": "gemma2", **TINY, "num_hidden_layers": 6, "head_dim": 32}
    g = spec_from_hf_dict(base, "g")
    assert (g.sliding_window, g.sliding_window_every, g.num_sliding_layers) == (4096, 2, 3)
    assert g.norms_per_layer == 4 and g.activation == "gelu_tanh" and g.tie_embeddings
    m = spec_from_hf_dict({"model_type": "mistral", **TINY, "num_key_value_heads": 2}, "m")
    assert (m.sliding_window, m.num_sliding_layers, m.kv_heads) == (4096, 2, 2)
    m2 = spec_from_hf_dict(
        {"model_type": "mistral", **TINY, "num_key_value_heads": 2, "sliding_window": None}, "m"
    )
    assert m2.sliding_window is None
    q = spec_from_hf_dict(
        {"model_type": "qwen2", **TINY, "num_key_value_heads": 4, "sliding_window": 128}, "q"
    )
    assert q.sliding_window is None  # use_sliding_window defaults to false
    ds = spec_from_hf_dict({"model_type": "deepseek_v3", **MLA, "q_lora_rank": None}, "d")
    assert ds.is_mla and ds.q_lora_rank is None and ds.num_dense_layers == 1
    assert ds.num_experts == 4 and ds.num_shared_experts == 1 and not ds.router_bias_params
    gpt = spec_from_hf_dict({"model_type": "gpt2", **GPT2_TINY}, "x")
    assert gpt.intermediate_size == 256 and gpt.position == "learned"
    assert gpt.max_position_embeddings == 1024 and gpt.activation == "gelu_new"
    assert gpt.hidden_dropout == gpt.attention_dropout == gpt.embedding_dropout == 0.1
    bert = spec_from_hf_dict({"model_type": "bert", **TINY}, "b")
    assert bert.arch == "encoder" and bert.type_vocab_size == 2 and bert.mlm_head


def test_layer_types_pattern(tmp_path: Path) -> None:
    types = ["sliding_attention", "sliding_attention", "full_attention", "full_attention"]
    cfg = {"model_type": "gemma2", **TINY, "num_hidden_layers": 4, "layer_types": types}
    with pytest.raises(GpuplanError, match="layer_types"):
        spec_from_hf_dict(cfg, "x")
    every_third = ["sliding_attention", "full_attention", "full_attention"] * 2
    cfg = {"model_type": "gemma2", **TINY, "num_hidden_layers": 6, "layer_types": every_third}
    spec = spec_from_hf_dict(cfg, "x")
    assert spec.sliding_window_every == 3 and spec.num_sliding_layers == 2
    only_full = ["full_attention"] * 6
    spec = spec_from_hf_dict({**cfg, "layer_types": only_full}, "x")
    assert spec.sliding_window is None


def test_hub_cache_name_and_custom(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = {"model_type": "llama", **TINY}
    snap = tmp_path / "models--org--tiny-llama" / "snapshots" / "abc123" / "config.json"
    snap.parent.mkdir(parents=True)
    snap.write_text(json.dumps(cfg))
    assert load_hf_config(snap).name == "org/tiny-llama"
    monkeypatch.chdir(tmp_path)
    Path("config.json").write_text(json.dumps(cfg))
    assert load_hf_config(Path("config.json")).name == "custom"
    assert get_model(str(snap)).params() == load_hf_config(snap).params()


# ---- bad input: one GpuplanError line naming the file and the field ------------------------


def _write(tmp_path: Path, content: str) -> Path:
    path = tmp_path / "bad" / "config.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(content, encoding="utf-8")
    return path


def test_unknown_model_type_lists_supported(tmp_path: Path) -> None:
    path = _write(tmp_path, json.dumps({"model_type": "t5", **TINY}))
    with pytest.raises(GpuplanError) as e:
        load_hf_config(path)
    msg = str(e.value)
    assert str(path) in msg and "model_type" in msg and "'t5'" in msg
    assert all(t in msg for t in SUPPORTED_MODEL_TYPES)
    assert "\n" not in msg


def test_missing_model_type(tmp_path: Path) -> None:
    with pytest.raises(GpuplanError, match="'model_type' is missing"):
        load_hf_config(_write(tmp_path, json.dumps(TINY)))


def test_missing_field_is_named(tmp_path: Path) -> None:
    cfg = {"model_type": "llama", **TINY}
    del cfg["hidden_size"]
    path = _write(tmp_path, json.dumps(cfg))
    with pytest.raises(GpuplanError) as e:
        load_hf_config(path)
    assert str(e.value) == f"{path}: field 'hidden_size' is missing (model_type llama)"


def test_malformed_json(tmp_path: Path) -> None:
    path = _write(tmp_path, '{"model_type": "llama", "hidden_size": 64,')
    with pytest.raises(GpuplanError, match=r"not valid JSON \(.*line 1"):
        load_hf_config(path)
    with pytest.raises(GpuplanError, match="JSON object"):
        load_hf_config(_write(tmp_path, "[1, 2]"))


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(GpuplanError, match="cannot read"):
        load_hf_config(tmp_path / "nope" / "config.json")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("hidden_size", -64),
        ("num_hidden_layers", 0),
        ("vocab_size", "1000"),
        ("num_attention_heads", 4.5),
        ("intermediate_size", True),
        ("num_key_value_heads", "two"),
        ("tie_word_embeddings", "yes"),
        ("hidden_act", "swiglu_magic"),
        ("head_dim", -1),
    ],
)
def test_bad_values_name_the_field(tmp_path: Path, field: str, value: object) -> None:
    path = _write(tmp_path, json.dumps({"model_type": "llama", **TINY, field: value}))
    with pytest.raises(InputError) as e:
        load_hf_config(path)
    msg = str(e.value)
    assert str(path) in msg and f"'{field}'" in msg and repr(value) in msg
    assert "\n" not in msg


def test_inconsistent_sizes_are_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path, json.dumps({"model_type": "llama", **TINY, "num_key_value_heads": 3}))
    with pytest.raises(GpuplanError) as e:
        load_hf_config(path)
    assert str(path) in str(e.value) and "num_kv_heads" in str(e.value)
    assert "\n" not in str(e.value)


def test_unsupported_layouts_are_refused() -> None:
    moe = {"model_type": "qwen2_moe", **TINY, "num_hidden_layers": 4, "decoder_sparse_step": 2}
    with pytest.raises(InputError, match="mlp_only_layers"):
        spec_from_hf_dict(moe, "x")
    moe = {"model_type": "qwen2_moe", **TINY, "moe_intermediate_size": 32,
           "shared_expert_intermediate_size": 48}
    with pytest.raises(InputError, match="shared_expert_intermediate_size"):
        spec_from_hf_dict(moe, "x")
    with pytest.raises(InputError, match="add_cross_attention"):
        spec_from_hf_dict({"model_type": "gpt2", **GPT2_TINY, "add_cross_attention": True}, "x")


def test_new_layouts_are_mapped() -> None:
    neox = spec_from_hf_dict({"model_type": "gpt_neox", **TINY}, "n")
    assert neox.parallel_residual and neox.rotary_dim == 4 and neox.norms_per_layer == 2
    assert neox.rope_dim == 4  # int(16 x rotary_pct 0.25)
    legacy = spec_from_hf_dict({"model_type": "gpt_neox", **TINY, "rotary_pct": 1.0}, "n")
    assert legacy.rotary_dim is None and legacy.rope_dim == 16
    f7 = spec_from_hf_dict({"model_type": "falcon", **TINY, "num_attention_heads": 8}, "f")
    assert (f7.kv_heads, f7.norms_per_layer, f7.intermediate_size) == (1, 1, 256)
    f40 = spec_from_hf_dict({"model_type": "falcon", **TINY, "new_decoder_architecture": True,
                             "num_kv_heads": 2}, "f")
    assert (f40.kv_heads, f40.norms_per_layer, f40.parallel_residual) == (2, 2, True)
    sc = spec_from_hf_dict({"model_type": "gpt_bigcode", **GPT2_TINY}, "s")
    assert sc.kv_heads == 1 and sc.position == "learned" and sc.fused_qkv
    q3 = spec_from_hf_dict({"model_type": "qwen3", **TINY, "num_key_value_heads": 4}, "q")
    assert q3.qk_norm == "head" and q3.head_size == 128 and q3.qk_norm_params() == 256
    o2 = spec_from_hf_dict({"model_type": "olmo2", **TINY, "num_key_value_heads": 2}, "o")
    assert o2.qk_norm_params() == 64 + 32  # q_norm over 4 x 16, k_norm over 2 x 16
    o3 = spec_from_hf_dict({"model_type": "olmo3", **TINY, "num_hidden_layers": 8}, "o")
    # Olmo3Config's default layer_types: sliding on every layer but each fourth
    assert (o3.sliding_window, o3.full_attention_every, o3.qk_norm) == (4096, 4, "all_heads")
    nem = spec_from_hf_dict({"model_type": "nemotron", **TINY, "num_key_value_heads": 4}, "n")
    assert nem.activation == "relu" and nem.mlp == "plain" and nem.rotary_dim == 8
    olmo = spec_from_hf_dict({"model_type": "olmo", **TINY}, "o")
    assert olmo.norm_params() == 0 and olmo.norm == "layernorm"
    g3 = spec_from_hf_dict({"model_type": "gemma3_text", **TINY, "num_hidden_layers": 12,
                            "sliding_window": 512}, "g")
    assert (g3.sliding_window, g3.full_attention_every, g3.num_sliding_layers) == (512, 6, 10)
    assert [g3.is_sliding_layer(i) for i in range(6)] == [True] * 5 + [False]


def test_gemma3_image_text_config_plans_its_language_model(tmp_path: Path) -> None:
    """A Gemma 3 4B-27B config.json (model_type gemma3) nests the language model in
    text_config; the spec is that model (Gemma3ForCausalLM), and its source says the vision
    tower is not counted."""
    text = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 6,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
            "vocab_size": 1000, "model_type": "gemma3_text"}
    path = tmp_path / "gemma3" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"model_type": "gemma3", "text_config": text,
                                "vision_config": {"model_type": "siglip_vision_model"}}))
    spec = load_hf_config(path)
    full, _ = _config_dicts("Gemma3TextConfig", {k: v for k, v in text.items()
                                                 if k != "model_type"})
    assert spec.params() == _hf_count("Gemma3TextConfig", full)
    assert spec.family == "gemma3_text" and "vision tower is not counted" in (spec.source or "")


def test_new_types_refuse_unsupported_variants() -> None:
    cases = [
        ({"model_type": "falcon", **TINY, "alibi": True}, "alibi"),
        ({"model_type": "falcon", **TINY, "new_decoder_architecture": True,
          "parallel_attn": False}, "parallel_attn"),
        ({"model_type": "falcon", **TINY, "num_ln_in_parallel_attn": 2}, "num_ln_in_parallel_attn"),
        ({"model_type": "phi", **TINY, "qk_layernorm": True}, "qk_layernorm"),
        ({"model_type": "gpt_bigcode", **GPT2_TINY, "add_cross_attention": True},
         "add_cross_attention"),
        ({"model_type": "gemma3_text", **TINY, "use_bidirectional_attention": True},
         "use_bidirectional_attention"),
        ({"model_type": "gpt_neox", **TINY, "rotary_pct": 1.5}, "rotary_pct"),
        ({"model_type": "stablelm", **TINY,
          "rope_parameters": {"partial_rotary_factor": 0}}, "partial_rotary_factor"),
        ({"model_type": "qwen3_moe", **TINY, "num_hidden_layers": 4, "decoder_sparse_step": 2},
         "mlp_only_layers"),
        ({"model_type": "gemma3", "text_config": {"model_type": "llama"}}, "text_config"),
        ({"model_type": "mpt", "attn_config": {"attn_type": "multiquery_attention"}},
         "attn_type"),
        ({"model_type": "mpt", "attn_config": {"qk_ln": True}}, "qk_ln"),
        ({"model_type": "mpt", "expansion_ratio": 8}, "expansion_ratio"),
    ]
    for cfg, field in cases:
        with pytest.raises(InputError) as e:
            spec_from_hf_dict(cfg, "x")
        assert field in str(e.value) and "\n" not in str(e.value), (cfg, str(e.value))


# ---- published parameter counts of real models (config values and counts cited) ----------

PUBLISHED: list[tuple[str, dict[str, Any], int]] = [
    # EleutherAI/pythia models/1.4B/pythia-1.4b.yml (24 layers, 2048 wide, 16 heads, rotary-pct
    # 0.25, gpt-j-residual, no weight tying). Count: the "Naming convention and parameter
    # count" table of the Pythia model cards (huggingface.co/EleutherAI/pythia-*): 1,414,647,808
    # total, 1,208,602,624 non-embedding, so the two 2048-wide embeddings have 50304 rows.
    ("pythia-1.4b", {"model_type": "gpt_neox", "vocab_size": 50304, "hidden_size": 2048,
                     "num_hidden_layers": 24, "num_attention_heads": 16,
                     "intermediate_size": 8192, "max_position_embeddings": 2048,
                     "rotary_pct": 0.25, "use_parallel_residual": True,
                     "tie_word_embeddings": False}, 1_414_647_808),
    # bigscience/bloom model card (Technical Specifications): 70 layers, 112 heads, hidden
    # 14336, vocab 250880; "176,247,271,424 parameters".
    ("bloom-176b", {"model_type": "bloom", "vocab_size": 250880, "hidden_size": 14336,
                    "n_layer": 70, "n_head": 112}, 176_247_271_424),
    # Qwen/Qwen3-8B config.json (as vendored in Chen-Oliver/qwen3-8b-base config.json); count
    # from its model.safetensors.index.json: total_size 16,381,470,720 bytes of bf16.
    ("qwen3-8b", {"model_type": "qwen3", "vocab_size": 151936, "hidden_size": 4096,
                  "intermediate_size": 12288, "num_hidden_layers": 36,
                  "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
                  "max_position_embeddings": 32768, "tie_word_embeddings": False,
                  "use_sliding_window": False, "sliding_window": None,
                  "max_window_layers": 36}, 16_381_470_720 // 2),
]


@pytest.mark.parametrize(("name", "cfg", "count"), PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_published_parameter_counts(name: str, cfg: dict[str, Any], count: int) -> None:
    assert spec_from_hf_dict(cfg, name).params() == count


def test_readme_lists_every_supported_type() -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    start = readme.index("A model is a preset name or a Hugging Face `config.json`")
    sentence = " ".join(readme[start:readme.index("Other types are refused", start)].split())
    assert all(f" {t}," in sentence or f" {t} " in sentence for t in SUPPORTED_MODEL_TYPES)


def test_traits_of_new_types_come_from_the_importer_only_for_benchmark_families() -> None:
    """BLOOM, MPT, Nemotron and OLMo 2 specs built in code (the training benchmarks' Megatron,
    llm-foundry, NeMo and OLMo-core runs) keep default traits; the importer sets the Hugging
    Face ones."""
    from gpuplan.specs.model import ModelSpec

    built = ModelSpec(name="n", family="nemotron", vocab_size=1000, hidden_size=64,
                      num_layers=2, num_heads=4, intermediate_size=128, norm="layernorm")
    assert not built.rope_concat and not built.norm_plus_one and not built.softmax_fp32
    imported = spec_from_hf_dict({"model_type": "nemotron", **TINY, "num_key_value_heads": 4}, "n")
    assert imported.rope_concat and imported.norm_plus_one and imported.softmax_fp32
    o2 = spec_from_hf_dict({"model_type": "olmo2", **TINY}, "o")
    assert o2.norm_weight_fp32 and o2.rope_tables_fp32 and o2.qk_norm_over_projection


@pytest.mark.parametrize("name", ["pythia-1.4b", "qwen3-8b"])
def test_cli_plans_a_published_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """End to end: `gpuplan models` and `gpuplan train` on a real model's config.json."""
    from gpuplan.cli.main import main

    cfg, count = next((c, n) for p, c, n in PUBLISHED if p == name)
    path = tmp_path / name / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(cfg), encoding="utf-8")
    assert main(["models", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["params"] == count
    assert main(["train", str(path), "--gpu", "h100", "--gpus", "8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tokens_per_s"] > 0 and isinstance(out["fits"], bool)
