"""Import a Hugging Face `config.json` (offline, from a file path) into a ModelSpec.

Pure Python: no `transformers` or `torch` import. For each supported `model_type` the field
names and defaults follow the `transformers` configuration class (v5), so that
`ModelSpec.params()` equals what `AutoModelForCausalLM.from_config` (decoders) or
`BertForMaskedLM` (bert) instantiates. The tests check this against the real classes.

Supported (`SUPPORTED_MODEL_TYPES`): bert, bloom, cohere, deepseek_v3, falcon, gemma, gemma2,
gemma3_text, gpt2, gpt_bigcode, gpt_neox, gptj, granite, llama, mistral, mixtral, mpt, nemotron,
olmo, olmo2, olmo3, opt, phi, phi3, qwen2, qwen2_moe, qwen3, qwen3_moe, stablelm, starcoder2; and gemma3
image-text configs, planned as their language model (text_config; the vision tower is not
counted). Anything else, and any variant a type's converter cannot express (Falcon ALiBi,
MPT multi-query...), is refused with one line naming the field and what is valid.
Implementation traits (fp32 softmax, fused QKV...) follow from the model_type
(`specs.model.FAMILY_TRAITS`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from gpuplan.errors import GpuplanError, InputError
from gpuplan.specs.files import load_json
from gpuplan.specs.limits import model_field_max
from gpuplan.specs.model import FAMILY_TRAITS, Activation, ModelSpec
from gpuplan.specs.model_file import model_from_record

_REQUIRED: Final = object()

# HF activation names (transformers.activations.ACT2FN) -> ModelSpec.activation
_ACTIVATIONS: Final[dict[str, Activation]] = {
    "gelu": "gelu",
    "gelu_new": "gelu_new",
    "gelu_fast": "gelu_new",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_python_tanh": "gelu_tanh",
    "relu": "relu",
    "silu": "silu",
    "swish": "silu",
}


class _Fields:
    """Typed access to one config dict; every error names the file, field and model_type."""

    def __init__(self, raw: Mapping[str, Any], origin: str, model_type: str) -> None:
        self.raw = raw
        self.origin = origin
        self.model_type = model_type

    def _get(self, key: str, default: object, aliases: tuple[str, ...]) -> object:
        for k in (key, *aliases):
            if k in self.raw:
                return self.raw[k]
        if default is _REQUIRED:
            raise GpuplanError(
                f"{self.origin}: field {key!r} is missing (model_type {self.model_type})"
            )
        return default

    def bad(self, key: str, value: object, valid: str) -> InputError:
        where = f"{self.origin}: field {key!r}"
        return InputError(where, value, f"{valid} (model_type {self.model_type})")

    def _check_int(self, key: str, value: object, minimum: int) -> int:
        top = model_field_max(key)
        if (isinstance(value, bool) or not isinstance(value, int) or value < minimum
                or value > top):
            raise self.bad(key, value, f"an integer from {minimum} to {top:,}")
        return value

    def integer(
        self, key: str, default: object = _REQUIRED, *, aliases: tuple[str, ...] = (),
        minimum: int = 1,
    ) -> int:
        """A whole number >= minimum; JSON null counts as absent (the default applies)."""
        value = self._get(key, default, aliases)
        if value is None and default is not _REQUIRED and default is not None:
            value = default
        return self._check_int(key, value, minimum)

    def opt_integer(self, key: str, default: int | None = None, *, minimum: int = 1) -> int | None:
        """A whole number >= minimum, or None when the field is null (or absent, default None)."""
        value = self._get(key, default, ())
        return None if value is None else self._check_int(key, value, minimum)

    def flag(self, key: str, default: bool) -> bool:
        value = self._get(key, default, ())
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.bad(key, value, "true or false")
        return value

    def text(self, key: str, default: str, *, aliases: tuple[str, ...] = ()) -> str:
        value = self._get(key, default, aliases)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self.bad(key, value, "a string")
        return value

    def activation(self, key: str, default: str, *, aliases: tuple[str, ...] = ()) -> Activation:
        name = self.text(key, default, aliases=aliases)
        act = _ACTIVATIONS.get(name)
        if act is None:
            raise self.bad(key, name, "one of: " + ", ".join(sorted(_ACTIVATIONS)))
        return act

    def number(self, key: str, default: float) -> float:
        """A probability such as a dropout rate, in [0, 1)."""
        value = self._get(key, default, ())
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
            raise self.bad(key, value, "a number in [0, 1)")
        return float(value)

    def fraction(self, key: str, value: object) -> float:
        """A share in (0, 1] (partial rotary factors)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
            raise self.bad(key, value, "a number in (0, 1]")
        return float(value)

    def int_list(self, key: str) -> list[int] | None:
        value = self._get(key, None, ())
        if value is None:
            return None
        if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            raise self.bad(key, value, "a list of layer indices")
        return list(value)

    def layer_types(self, num_layers: int) -> list[str] | None:
        """`layer_types` as written by transformers >= 4.53 (None when absent)."""
        value = self._get("layer_types", None, ())
        if value is None:
            return None
        valid = {"full_attention", "sliding_attention"}
        if not isinstance(value, list) or len(value) != num_layers or not set(value) <= valid:
            raise self.bad(
                "layer_types", value,
                f"a list of {num_layers} entries, each 'full_attention' or 'sliding_attention'",
            )
        return list(value)


def _sliding_pattern(f: _Fields, sliding: list[int], num_layers: int) -> dict[str, int]:
    """ModelSpec.sliding_window_every for layers 0, k, 2k... using the window, or
    full_attention_every for full attention on layers k-1, 2k-1... only (Gemma 3); else
    refuse."""
    if sliding == list(range(0, num_layers, num_layers)):  # only layer 0
        return {"sliding_window_every": num_layers}
    if len(sliding) >= 2:
        step = sliding[1] - sliding[0]
        if sliding == list(range(0, num_layers, step)):
            return {"sliding_window_every": step}
    full = [i for i in range(num_layers) if i not in set(sliding)]
    if full and full == list(range(full[0], num_layers, full[0] + 1)):
        return {"full_attention_every": full[0] + 1}
    raise f.bad(
        "layer_types", f"sliding attention on layers {sliding}",
        "sliding attention on every k-th layer starting at layer 0, or on all but every k-th"
        " layer (other patterns are not supported)",
    )


def _sliding(
    f: _Fields, num_layers: int, window: int | None, default_types: list[str] | None
) -> dict[str, Any]:
    """sliding_window / sliding_window_every from `layer_types` (or the type's default)."""
    types = f.layer_types(num_layers) or default_types
    if window is None:
        return {}
    if types is None:  # every layer uses the window (Mistral, Mixtral, Phi-3)
        return {"sliding_window": window, "sliding_window_every": 1}
    layers = [i for i, t in enumerate(types) if t == "sliding_attention"]
    if not layers:
        return {}
    return {"sliding_window": window, **_sliding_pattern(f, layers, num_layers)}


def _head_dim(f: _Fields) -> int | None:
    """An explicit `head_dim` (the modeling code reads it with getattr)."""
    return f.opt_integer("head_dim")


def _rotary_dim(f: _Fields, head_dim: int, legacy: str, default: float) -> int | None:
    """RoPE's rotated dims per head, int(head_dim x partial_rotary_factor), as transformers v5
    reads it: `rope_parameters` (or legacy `rope_scaling`) first, then the type's legacy field
    (GPT-NeoX rotary_pct; Phi, StableLM, Nemotron partial_rotary_factor). None = every dim."""
    params = f.raw.get("rope_parameters") or f.raw.get("rope_scaling")
    factor = params.get("partial_rotary_factor") if isinstance(params, Mapping) else None
    key = "rope_parameters.partial_rotary_factor"
    if factor is None:
        key, factor = legacy, f.raw.get(legacy, default)
    dim = int(head_dim * f.fraction(key, factor))
    if dim < 1:
        raise f.bad(key, factor, f"at least 1/{head_dim} (one rotated dim per head)")
    return None if dim == head_dim else dim


def _core(f: _Fields) -> dict[str, Any]:
    """The dimensions every Llama-like decoder config has (and must state)."""
    return {
        "vocab_size": f.integer("vocab_size"),
        "hidden_size": f.integer("hidden_size"),
        "num_layers": f.integer("num_hidden_layers"),
        "num_heads": f.integer("num_attention_heads"),
        "intermediate_size": f.integer("intermediate_size"),
    }


def _rope_decoder(f: _Fields, **kw: Any) -> dict[str, Any]:
    """Shared fields of RoPE / RMSNorm / gated-MLP decoders."""
    return {
        "arch": "decoder",
        "mlp": "gated",
        "norm": "rmsnorm",
        "position": "rope",
        "attention_dropout": f.number("attention_dropout", 0.0),
        **_core(f),
        **kw,
    }


# ---- one converter per model_type --------------------------------------------------------


def _gpt2_names(f: _Fields, positions: int, tied: bool, dropout: float) -> dict[str, Any]:
    """The fields GPT-2's config names (n_embd, n_layer, n_head, n_inner, n_positions,
    *_pdrop), shared by the model types that kept its naming (GPT-2, GPT-J): a plain MLP of
    n_inner (default 4 x n_embd), LayerNorm, MLP biases."""
    d = f.integer("n_embd", aliases=("hidden_size",))
    inner = f.opt_integer("n_inner")
    return {
        "arch": "decoder",
        "vocab_size": f.integer("vocab_size"),
        "hidden_size": d,
        "num_layers": f.integer("n_layer", aliases=("num_hidden_layers",)),
        "num_heads": f.integer("n_head", aliases=("num_attention_heads",)),
        "intermediate_size": inner if inner is not None else 4 * d,
        "mlp": "plain",
        "activation": f.activation("activation_function", "gelu_new"),
        "norm": "layernorm",
        "max_position_embeddings": f.integer(
            "n_positions", positions, aliases=("max_position_embeddings",)
        ),
        "tie_embeddings": f.flag("tie_word_embeddings", tied),
        "mlp_bias": True,
        "hidden_dropout": f.number("resid_pdrop", dropout),
        "attention_dropout": f.number("attn_pdrop", dropout),
        "embedding_dropout": f.number("embd_pdrop", dropout),
    }


def _gpt2(f: _Fields) -> dict[str, Any]:
    if f.flag("add_cross_attention", False):
        raise f.bad("add_cross_attention", True, "false (cross-attention is not supported)")
    return {**_gpt2_names(f, positions=1024, tied=True, dropout=0.1),
            "position": "learned", "qkv_bias": True, "out_bias": True}


def _llama(f: _Fields) -> dict[str, Any]:
    bias = f.flag("attention_bias", False)
    return _rope_decoder(
        f,
        num_kv_heads=f.opt_integer("num_key_value_heads"),
        head_dim=_head_dim(f),
        activation=f.activation("hidden_act", "silu"),
        max_position_embeddings=f.integer("max_position_embeddings", 2048),
        tie_embeddings=f.flag("tie_word_embeddings", False),
        qkv_bias=bias,
        out_bias=bias,
        mlp_bias=f.flag("mlp_bias", False),
    )


def _granite(f: _Fields) -> dict[str, Any]:
    # transformers models/granite/configuration_granite.py (v5): the Llama layout and
    # defaults; embedding_multiplier, residual_multiplier, attention_multiplier and
    # logits_scaling are scalars (no parameters, nothing kept for backward).
    return _llama(f)


def _mistral(f: _Fields) -> dict[str, Any]:
    # MistralConfig: num_key_value_heads defaults to 8, sliding_window to 4096 (all layers).
    return _rope_decoder(
        f,
        num_kv_heads=f.integer("num_key_value_heads", 8),
        head_dim=_head_dim(f),
        activation=f.activation("hidden_act", "silu"),
        max_position_embeddings=f.integer("max_position_embeddings", 4096 * 32),
        tie_embeddings=f.flag("tie_word_embeddings", False),
        **_sliding_all_layers(f, 4096),
    )


def _sliding_all_layers(f: _Fields, default: int | None) -> dict[str, Any]:
    window = f.opt_integer("sliding_window", default)
    return {"sliding_window": window, "sliding_window_every": 1} if window else {}


def _mixtral(f: _Fields) -> dict[str, Any]:
    return _rope_decoder(
        f,
        num_kv_heads=f.integer("num_key_value_heads", 8),
        head_dim=_head_dim(f),
        activation=f.activation("hidden_act", "silu"),
        max_position_embeddings=f.integer("max_position_embeddings", 4096 * 32),
        tie_embeddings=f.flag("tie_word_embeddings", False),
        num_experts=f.integer("num_local_experts", 8, aliases=("num_experts",)),
        experts_per_token=f.integer("num_experts_per_tok", 2),
        **_sliding_all_layers(f, None),
    )


def _qwen2(f: _Fields) -> dict[str, Any]:
    # Qwen2: q/k/v always have a bias, o_proj never. Sliding window only if use_sliding_window,
    # and then on layers >= max_window_layers.
    num_layers = f.integer("num_hidden_layers")
    use_sw = f.flag("use_sliding_window", False)
    window = f.opt_integer("sliding_window", 4096) if use_sw else None
    mwl = f.integer("max_window_layers", 28, minimum=0)
    default_types = [
        "sliding_attention" if window is not None and i >= mwl else "full_attention"
        for i in range(num_layers)
    ]
    return _rope_decoder(
        f,
        num_kv_heads=f.integer("num_key_value_heads", 32),
        head_dim=_head_dim(f),
        activation=f.activation("hidden_act", "silu"),
        max_position_embeddings=f.integer("max_position_embeddings", 32768),
        tie_embeddings=f.flag("tie_word_embeddings", False),
        qkv_bias=True,
        **_sliding(f, num_layers, window, default_types),
    )


def _qwen2_moe(f: _Fields) -> dict[str, Any]:
    num_layers = f.integer("num_hidden_layers")
    use_sw = f.flag("use_sliding_window", False)
    window = f.opt_integer("sliding_window", 4096) if use_sw else None
    mwl = f.integer("max_window_layers", 28, minimum=0)
    default_types = [
        "sliding_attention" if (i + 1) % 2 and i < mwl and use_sw else "full_attention"
        for i in range(num_layers)
    ]
    spec = _rope_decoder(
        f,
        num_kv_heads=f.integer("num_key_value_heads", 16),
        head_dim=_head_dim(f),
        activation=f.activation("hidden_act", "silu"),
        max_position_embeddings=f.integer("max_position_embeddings", 32768),
        tie_embeddings=f.flag("tie_word_embeddings", False),
        qkv_bias=f.flag("qkv_bias", True),
        **_sliding(f, num_layers, window, default_types),
    )
    num_experts = f.integer("num_experts", 60, minimum=0)
    if num_experts == 0:
        return spec
    dense = _leading_dense_layers(f, num_layers)
    expert = f.integer("moe_intermediate_size", 1408)
    shared = f.integer("shared_expert_intermediate_size", 5632, minimum=0)
    if shared % expert:
        raise f.bad(
            "shared_expert_intermediate_size", shared,
            f"a multiple of moe_intermediate_size ({expert})",
        )
    spec.update(
        num_experts=num_experts,
        experts_per_token=f.integer("num_experts_per_tok", 4),
        moe_intermediate_size=expert,
        num_shared_experts=shared // expert,
        shared_expert_gate=True,
        first_dense_layers=dense,
    )
    return spec


def _leading_dense_layers(f: _Fields, num_layers: int) -> int:
    """Qwen-MoE layouts: a layer is dense if listed in mlp_only_layers or (i + 1) is not a
    multiple of decoder_sparse_step; only leading dense layers are supported."""
    step = f.integer("decoder_sparse_step", 1)
    mlp_only = set(f.int_list("mlp_only_layers") or [])
    dense = [i for i in range(num_layers) if i in mlp_only or (i + 1) % step != 0]
    if dense != list(range(len(dense))):
        raise f.bad(
            "mlp_only_layers", f"dense MLP layers {dense}",
            "dense layers only at the start (mlp_only_layers = [0..k-1], decoder_sparse_step = 1)",
        )
    return len(dense)


def _qwen3(f: _Fields) -> dict[str, Any]:
    # transformers models/qwen3/configuration_qwen3.py (v5): head_dim defaults to 128 and
    # attention_bias covers q, k, v and o; modeling_qwen3.py adds q_norm/k_norm (RMSNorm over
    # head_dim). Sliding window as Qwen2 (use_sliding_window, layers >= max_window_layers).
    num_layers = f.integer("num_hidden_layers")
    use_sw = f.flag("use_sliding_window", False)
    window = f.opt_integer("sliding_window", 4096) if use_sw else None
    mwl = f.integer("max_window_layers", 28, minimum=0)
    default_types = [
        "sliding_attention" if window is not None and i >= mwl else "full_attention"
        for i in range(num_layers)
    ]
    bias = f.flag("attention_bias", False)
    return _rope_decoder(
        f,
        num_kv_heads=f.integer("num_key_value_heads", 32),
        head_dim=f.integer("head_dim", 128),
        activation=f.activation("hidden_act", "silu"),
        max_position_embeddings=f.integer("max_position_embeddings", 32768),
        tie_embeddings=f.flag("tie_word_embeddings", False),
        qkv_bias=bias,
        out_bias=bias,
        qk_norm="head",
        **_sliding(f, num_layers, window, default_types),
    )


def _qwen3_moe(f: _Fields) -> dict[str, Any]:
    # transformers models/qwen3_moe/configuration_qwen3_moe.py (v5): no head_dim field
    # (modeling reads getattr(config, "head_dim", hidden // heads)); no shared expert; the
    # sliding window, when used, covers every layer (Qwen3MoeAttention.sliding_window).
    num_layers = f.integer("num_hidden_layers")
    bias = f.flag("attention_bias", False)
    use_sw = f.flag("use_sliding_window", False)
    spec = _rope_decoder(
        f,
        num_kv_heads=f.integer("num_key_value_heads", 4),
        head_dim=_head_dim(f),
        activation=f.activation("hidden_act", "silu"),
        max_position_embeddings=f.integer("max_position_embeddings", 32768),
        tie_embeddings=f.flag("tie_word_embeddings", False),
        qkv_bias=bias,
        out_bias=bias,
        qk_norm="head",
        **(_sliding_all_layers(f, 4096) if use_sw else {}),
    )
    num_experts = f.integer("num_experts", 128, aliases=("num_local_experts",), minimum=0)
    if num_experts == 0:
        return spec
    spec.update(
        num_experts=num_experts,
        experts_per_token=f.integer("num_experts_per_tok", 8),
        moe_intermediate_size=f.integer("moe_intermediate_size", 768),
        first_dense_layers=_leading_dense_layers(f, num_layers),
    )
    return spec


def _layernorm_decoder(f: _Fields, **kw: Any) -> dict[str, Any]:
    """Shared fields of RoPE / LayerNorm / plain-MLP decoders (GPT-NeoX, Falcon, StarCoder2)."""
    return {
        "arch": "decoder",
        "mlp": "plain",
        "norm": "layernorm",
        "position": "rope",
        **_core(f),
        **kw,
    }


def _gpt_neox(f: _Fields) -> dict[str, Any]:
    # transformers models/gpt_neox/configuration_gpt_neox.py (v5): fused query_key_value
    # (multi-head only), attention_bias on it and on dense, MLP biases always, two LayerNorms
    # per layer. use_parallel_residual (default true) runs attention and MLP side by side on
    # the same input: the same matmuls and norms, one saved copy of that input less. Partial
    # rotary (rotary_pct, 0.25) only narrows RoPE's element-wise work and tables.
    bias = f.flag("attention_bias", True)
    hidden_dropout = f.number("hidden_dropout", 0.0)
    head_dim = f.integer("hidden_size") // f.integer("num_attention_heads")
    return _layernorm_decoder(
        f,
        parallel_residual=f.flag("use_parallel_residual", True),
        rotary_dim=_rotary_dim(f, head_dim, "rotary_pct", 0.25),
        activation=f.activation("hidden_act", "gelu"),
        max_position_embeddings=f.integer("max_position_embeddings", 2048),
        tie_embeddings=f.flag("tie_word_embeddings", False),
        qkv_bias=bias,
        out_bias=bias,
        mlp_bias=True,
        hidden_dropout=hidden_dropout,
        embedding_dropout=hidden_dropout,  # GPTNeoXModel.emb_dropout
        attention_dropout=f.number("attention_dropout", 0.0),
    )


def _falcon_layout(f: _Fields, heads: int) -> dict[str, Any]:
    """Falcon's attention layout and norms per layer (FalconAttention, FalconDecoderLayer)."""
    new_arch = f.flag("new_decoder_architecture", False)
    parallel = f.flag("parallel_attn", True)
    if f.flag("alibi", False):
        raise f.bad("alibi", True, "false (ALiBi position biases are not supported; RoPE is)")
    if new_arch and not parallel:
        raise f.bad("parallel_attn", False, "true when new_decoder_architecture is true "
                    "(transformers runs no such layer)")
    n_ln = f.opt_integer("num_ln_in_parallel_attn") or (2 if new_arch else 1)
    if n_ln not in (1, 2) or (n_ln == 2 and not new_arch):
        raise f.bad("num_ln_in_parallel_attn", n_ln,
                    "1, or 2 with new_decoder_architecture true")
    if new_arch:
        kv = f.integer("num_kv_heads", heads, aliases=("n_head_kv",))
    else:
        kv = 1 if f.flag("multi_query", True) else heads
    return {"num_kv_heads": kv, "norms_per_layer": n_ln if parallel else 2,
            "parallel_residual": parallel}


def _falcon(f: _Fields) -> dict[str, Any]:
    # transformers models/falcon/configuration_falcon.py and modeling_falcon.py (v5): fused
    # query_key_value; multi_query (old layout) = one K/V head, new_decoder_architecture uses
    # num_kv_heads; parallel_attn shares one input LayerNorm between attention and MLP (two,
    # ln_attn and ln_mlp, in the new layout); `bias` covers every linear; ffn_hidden_size
    # defaults to 4 x hidden. The RoPE path applies no dropout to the attention probabilities.
    # hidden_dropout is applied once per layer in parallel layers (the op model applies it
    # after attention and after the MLP; published configs have 0.0).
    d = f.integer("hidden_size", aliases=("n_embed",))
    heads = f.integer("num_attention_heads", aliases=("n_head",))
    bias = f.flag("bias", False)
    ffn = f.opt_integer("ffn_hidden_size")
    return {
        "arch": "decoder",
        "vocab_size": f.integer("vocab_size"),
        "hidden_size": d,
        "num_layers": f.integer("num_hidden_layers", aliases=("n_layer",)),
        "num_heads": heads,
        "intermediate_size": ffn if ffn is not None else 4 * d,
        "mlp": "plain",
        "activation": f.activation("activation", "gelu"),
        "norm": "layernorm",
        "position": "rope",
        "max_position_embeddings": f.integer("max_position_embeddings", 2048),
        "tie_embeddings": f.flag("tie_word_embeddings", True),
        "qkv_bias": bias,
        "out_bias": bias,
        "mlp_bias": bias,
        "hidden_dropout": f.number("hidden_dropout", 0.0),
        **_falcon_layout(f, heads),
    }


def _gpt_bigcode(f: _Fields) -> dict[str, Any]:
    # transformers models/gpt_bigcode/configuration_gpt_bigcode.py (v5): GPT-2 layout (learned
    # positions, LayerNorm, biases everywhere, fused c_attn) with multi_query (default true):
    # one K/V head, c_attn of width hidden + 2 x head_dim; its default activation is
    # gelu_pytorch_tanh (GPT-2's gelu_new).
    fields = _gpt2(f)
    heads = fields["num_heads"]
    return {**fields, "num_kv_heads": 1 if f.flag("multi_query", True) else heads,
            "activation": f.activation("activation_function", "gelu_pytorch_tanh")}


def _starcoder2(f: _Fields) -> dict[str, Any]:
    # transformers models/starcoder2/configuration_starcoder2.py (v5): GQA (2 K/V heads by
    # default), use_bias on every linear, LayerNorms with bias, plain c_fc/c_proj MLP, tied
    # embeddings; sliding_window (default none) on every layer when set.
    bias = f.flag("use_bias", True)
    return _layernorm_decoder(
        f,
        num_kv_heads=f.integer("num_key_value_heads", 2),
        head_dim=_head_dim(f),
        activation=f.activation("hidden_act", "gelu_pytorch_tanh"),
        max_position_embeddings=f.integer("max_position_embeddings", 4096),
        tie_embeddings=f.flag("tie_word_embeddings", True),
        qkv_bias=bias,
        out_bias=bias,
        mlp_bias=bias,
        hidden_dropout=f.number("residual_dropout", 0.0),
        embedding_dropout=f.number("embedding_dropout", 0.0),
        attention_dropout=f.number("attention_dropout", 0.0),
        **_sliding_all_layers(f, None),
    )


def _olmo2(f: _Fields) -> dict[str, Any]:
    # transformers models/olmo2/configuration_olmo2.py and modeling_olmo2.py (v5): Llama
    # layout with q_norm/k_norm (RMSNorm over the whole q and k projections) and the two
    # RMSNorms of a layer applied to the attention and MLP outputs before the residual add
    # (post_attention_layernorm, post_feedforward_layernorm) instead of to their inputs: the
    # same norm sizes and work, so the op model keeps its pre-norm placement. Olmo2Config has
    # no mlp_bias, so the Llama converter's default (none) holds.
    return {**_llama(f), "qk_norm": "all_heads"}


def _olmo3(f: _Fields) -> dict[str, Any]:
    # transformers models/olmo3/configuration_olmo3.py (v5.25): Olmo 2's layout (above) with
    # sliding-window attention, sliding_window 4096 by default, on the layers layer_types
    # names; by default every layer but each fourth ("sliding_attention" unless (i + 1) % 4
    # == 0), the [4096, 4096, 4096, full] pattern of OLMo-core's Olmo 3 configs.
    num_layers = f.integer("num_hidden_layers")
    default_types = ["sliding_attention" if (i + 1) % 4 else "full_attention"
                     for i in range(num_layers)]
    return {**_olmo2(f),
            **_sliding(f, num_layers, f.opt_integer("sliding_window", 4096), default_types)}


def _phi(f: _Fields) -> dict[str, Any]:
    # transformers models/phi/configuration_phi.py and modeling_phi.py (v5), phi-1/1.5/2:
    # attention and MLP in parallel on one shared input_layernorm; biases on q, k, v, dense,
    # fc1, fc2 and the LM head; partial rotary (0.5 by default).
    if f.flag("qk_layernorm", False):
        raise f.bad("qk_layernorm", True, "false (Phi query/key LayerNorms are not supported)")
    d, heads = f.integer("hidden_size"), f.integer("num_attention_heads")
    head_dim = _head_dim(f)
    return _layernorm_decoder(
        f,
        num_kv_heads=f.opt_integer("num_key_value_heads"),
        head_dim=head_dim,
        activation=f.activation("hidden_act", "gelu_new"),
        max_position_embeddings=f.integer("max_position_embeddings", 2048),
        tie_embeddings=f.flag("tie_word_embeddings", False),
        qkv_bias=True,
        out_bias=True,
        mlp_bias=True,
        lm_head_bias=True,
        norms_per_layer=1,
        parallel_residual=True,
        rotary_dim=_rotary_dim(f, head_dim or d // heads, "partial_rotary_factor", 0.5),
        hidden_dropout=f.number("resid_pdrop", 0.0),
        embedding_dropout=f.number("embd_pdrop", 0.0),
        attention_dropout=f.number("attention_dropout", 0.0),
    )


def _gptj(f: _Fields) -> dict[str, Any]:
    # transformers models/gptj/configuration_gptj.py and modeling_gptj.py (v5): attention and
    # MLP in parallel on one shared ln_1; no attention biases; MLP and LM-head biases; RoPE on
    # the first rotary_dim (64) dims of each head (null: all).
    fields = _gpt2_names(f, positions=2048, tied=False, dropout=0.0)
    head = fields["hidden_size"] // fields["num_heads"]
    rotary = f.opt_integer("rotary_dim", 64)
    return {**fields, "position": "rope",
            "rotary_dim": rotary if rotary is not None and rotary < head else None,
            "lm_head_bias": True, "norms_per_layer": 1, "parallel_residual": True}


def _stablelm(f: _Fields) -> dict[str, Any]:
    # transformers models/stablelm/configuration_stablelm.py and modeling_stablelm.py (v5):
    # LayerNorms with bias, SwiGLU without biases, use_qkv_bias on q/k/v (never o_proj),
    # head_dim = hidden / heads, partial rotary (0.25); use_parallel_residual shares the
    # input_layernorm; qk_layernorm adds one bias-free LayerNorm per head on q and on k.
    parallel = f.flag("use_parallel_residual", False)
    d, heads = f.integer("hidden_size"), f.integer("num_attention_heads")
    return {
        "arch": "decoder",
        "mlp": "gated",
        "norm": "layernorm",
        "position": "rope",
        **_core(f),
        "num_kv_heads": f.integer("num_key_value_heads", 32),
        "activation": f.activation("hidden_act", "silu"),
        "max_position_embeddings": f.integer("max_position_embeddings", 4096),
        "tie_embeddings": f.flag("tie_word_embeddings", False),
        "qkv_bias": f.flag("use_qkv_bias", False),
        "qk_norm": "all_heads" if f.flag("qk_layernorm", False) else "none",
        "norms_per_layer": 1 if parallel else 2,
        "parallel_residual": parallel,
        "rotary_dim": _rotary_dim(f, d // heads, "partial_rotary_factor", 0.25),
        "hidden_dropout": f.number("hidden_dropout", 0.0),
        "attention_dropout": f.number("attention_dropout", 0.0),
    }


def _nemotron(f: _Fields) -> dict[str, Any]:
    # transformers models/nemotron/configuration_nemotron.py and modeling_nemotron.py (v5):
    # plain up/down MLP with relu2 (squared ReLU: the same matmuls as ReLU, mapped to relu),
    # LayerNorm1P (weight and bias; scales by 1 + weight), attention_bias on q, k, v, o,
    # partial rotary (0.5).
    act = f.text("hidden_act", "relu2")
    d, heads = f.integer("hidden_size"), f.integer("num_attention_heads")
    head_dim = _head_dim(f)
    return _layernorm_decoder(
        f,
        num_kv_heads=f.opt_integer("num_key_value_heads"),
        head_dim=head_dim,
        activation="relu" if act == "relu2" else f.activation("hidden_act", "relu2"),
        max_position_embeddings=f.integer("max_position_embeddings", 4096),
        tie_embeddings=f.flag("tie_word_embeddings", False),
        qkv_bias=f.flag("attention_bias", False),
        out_bias=f.flag("attention_bias", False),
        mlp_bias=f.flag("mlp_bias", False),
        rotary_dim=_rotary_dim(f, head_dim or d // heads, "partial_rotary_factor", 0.5),
        attention_dropout=f.number("attention_dropout", 0.0),
    )


def _cohere(f: _Fields) -> dict[str, Any]:
    # transformers models/cohere/configuration_cohere.py and modeling_cohere.py (v5), Command
    # R: attention and MLP in parallel on one shared CohereLayerNorm (weight, no bias), tied
    # embeddings, attention_bias on q, k, v, o; use_qk_norm adds weight-only LayerNorms over
    # (heads, head_dim) on q and k. logit_scale only scales the logits.
    bias = f.flag("attention_bias", False)
    return {
        "arch": "decoder",
        "mlp": "gated",
        "norm": "layernorm",
        "norm_affine": "weight",
        "position": "rope",
        **_core(f),
        "num_kv_heads": f.opt_integer("num_key_value_heads"),
        "head_dim": _head_dim(f),
        "activation": f.activation("hidden_act", "silu"),
        "max_position_embeddings": f.integer("max_position_embeddings", 8192),
        "tie_embeddings": f.flag("tie_word_embeddings", True),
        "qkv_bias": bias,
        "out_bias": bias,
        "qk_norm": "all_heads" if f.flag("use_qk_norm", False) else "none",
        "norms_per_layer": 1,
        "parallel_residual": True,
        "attention_dropout": f.number("attention_dropout", 0.0),
    }


def _olmo(f: _Fields) -> dict[str, Any]:
    # transformers models/olmo/configuration_olmo.py and modeling_olmo.py (v5), OLMo 1: Llama
    # layout with OlmoLayerNorm, a LayerNorm with no weight and no bias. clip_qkv clamps the
    # projections (one element-wise op, not modelled).
    bias = f.flag("attention_bias", False)
    return {
        **_rope_decoder(
            f,
            num_kv_heads=f.opt_integer("num_key_value_heads"),
            head_dim=_head_dim(f),
            activation=f.activation("hidden_act", "silu"),
            max_position_embeddings=f.integer("max_position_embeddings", 2048),
            tie_embeddings=f.flag("tie_word_embeddings", False),
            qkv_bias=bias,
            out_bias=bias,
        ),
        "norm": "layernorm",
        "norm_affine": "none",
    }


def _bloom(f: _Fields) -> dict[str, Any]:
    # transformers models/bloom/configuration_bloom.py and modeling_bloom.py (v5): ALiBi (no
    # position parameters; a per-head linear bias added to the scores, b x heads x s
    # elements, which the op model leaves out), a LayerNorm on the word embeddings, fused
    # query_key_value, biases everywhere, 4 x hidden MLP with tanh GELU, tied embeddings.
    # apply_residual_connection_post_layernorm only changes which tensor is added back.
    return {
        "arch": "decoder",
        "vocab_size": f.integer("vocab_size", 250_880),
        "hidden_size": (d := f.integer("hidden_size", 64, aliases=("n_embed",))),
        "num_layers": f.integer("n_layer", 2, aliases=("num_hidden_layers",)),
        "num_heads": f.integer("n_head", 8, aliases=("num_attention_heads",)),
        "intermediate_size": 4 * d,
        "mlp": "plain",
        "activation": "gelu_tanh",  # BloomGelu: the tanh approximation
        "norm": "layernorm",
        "position": "none",
        "embedding_norm": True,
        "tie_embeddings": f.flag("tie_word_embeddings", True),
        "qkv_bias": True,
        "out_bias": True,
        "mlp_bias": True,
        "hidden_dropout": f.number("hidden_dropout", 0.0),
        "attention_dropout": f.number("attention_dropout", 0.0),
    }


def _mpt(f: _Fields) -> dict[str, Any]:
    # transformers models/mpt/configuration_mpt.py and modeling_mpt.py (v5): fused Wqkv
    # (multi-head), no linear biases, bias-free LayerNorms, a 4 x d_model exact-GELU MLP, tied
    # embeddings, ALiBi (an h x s bias added to the scores; no position parameters). The
    # layer settings live in attn_config; transformers' MPT implements only some of them.
    attn = f.raw.get("attn_config") or {}
    if not isinstance(attn, Mapping):
        raise f.bad("attn_config", attn, "a JSON object")
    sub = _Fields(attn, f"{f.origin} attn_config", f.model_type)
    if sub.text("attn_type", "multihead_attention") != "multihead_attention":
        raise sub.bad("attn_type", attn.get("attn_type"),
                      "'multihead_attention' (transformers' MPT has no multi-query layout)")
    if sub.flag("qk_ln", False):
        raise sub.bad("qk_ln", True, "false (transformers' MPT has no query/key LayerNorms)")
    d = f.integer("d_model", 2048, aliases=("hidden_size",))
    ratio = f.integer("expansion_ratio", 4)
    if ratio != 4:
        raise f.bad("expansion_ratio", ratio, "4 (transformers' MptMLP is 4 x d_model)")
    p_drop = sub.number("attn_pdrop", 0.0)
    return {
        "arch": "decoder",
        "vocab_size": f.integer("vocab_size", 50_368),
        "hidden_size": d,
        "num_layers": f.integer("n_layers", 24, aliases=("num_hidden_layers",)),
        "num_heads": f.integer("n_heads", 16, aliases=("num_attention_heads",)),
        "intermediate_size": 4 * d,
        "mlp": "plain",
        "activation": "gelu",
        "norm": "layernorm",
        "norm_affine": "weight",
        "position": "none",
        "max_position_embeddings": f.integer("max_seq_len", 2048),
        "tie_embeddings": True,  # MptForCausalLM ties lm_head to wte
        "hidden_dropout": p_drop,  # MptBlock and MptMLP use attn_pdrop on the residual branches
        "attention_dropout": p_drop,
    }


def _deepseek_v3(f: _Fields) -> dict[str, Any]:
    # MLA attention; MoE from layer first_k_dense_replace on. The router's e_score_correction_bias
    # is a buffer in transformers (not a parameter); the MTP module is not instantiated.
    bias = f.flag("attention_bias", False)
    if f.flag("mlp_bias", False):
        raise f.bad("mlp_bias", True, "false (DeepSeek-V3 MLPs have no bias)")
    num_layers = f.integer("num_hidden_layers")
    num_experts = f.integer("n_routed_experts", 256, minimum=0)
    spec = _rope_decoder(
        f,
        activation=f.activation("hidden_act", "silu"),
        max_position_embeddings=f.integer("max_position_embeddings", 4096),
        tie_embeddings=f.flag("tie_word_embeddings", False),
        qkv_bias=bias,
        out_bias=bias,
        q_lora_rank=f.opt_integer("q_lora_rank", 1536),
        kv_lora_rank=f.integer("kv_lora_rank", 512),
        qk_nope_head_dim=f.integer("qk_nope_head_dim", 128),
        qk_rope_head_dim=f.integer("qk_rope_head_dim", 64),
        v_head_dim=f.integer("v_head_dim", 128),
    )
    if num_experts:
        spec.update(
            num_experts=num_experts,
            experts_per_token=f.integer("num_experts_per_tok", 8),
            moe_intermediate_size=f.integer("moe_intermediate_size", 2048),
            num_shared_experts=f.integer("n_shared_experts", 1, minimum=0),
            first_dense_layers=min(f.integer("first_k_dense_replace", 3, minimum=0), num_layers),
        )
    return spec


def _gemma(f: _Fields) -> dict[str, Any]:
    bias = f.flag("attention_bias", False)
    # GemmaConfig turns the legacy "gelu" into the tanh approximation
    legacy = f.text("hidden_act", "gelu_pytorch_tanh") == "gelu"
    act = "gelu_tanh" if legacy else f.activation("hidden_act", "gelu_pytorch_tanh")
    return _rope_decoder(
        f,
        num_kv_heads=f.integer("num_key_value_heads", 16),
        head_dim=f.integer("head_dim", 256),
        activation=act,
        max_position_embeddings=f.integer("max_position_embeddings", 8192),
        tie_embeddings=f.flag("tie_word_embeddings", True),
        qkv_bias=bias,
        out_bias=bias,
    )


def _gemma2(f: _Fields) -> dict[str, Any]:
    bias = f.flag("attention_bias", False)
    num_layers = f.integer("num_hidden_layers")
    default_types = [
        "sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(num_layers)
    ]
    return _rope_decoder(
        f,
        num_kv_heads=f.integer("num_key_value_heads", 4),
        head_dim=f.integer("head_dim", 256),
        activation=f.activation("hidden_activation", "gelu_pytorch_tanh"),
        max_position_embeddings=f.integer("max_position_embeddings", 8192),
        tie_embeddings=f.flag("tie_word_embeddings", True),
        qkv_bias=bias,
        out_bias=bias,
        norms_per_layer=4,
        **_sliding(f, num_layers, f.opt_integer("sliding_window", 4096), default_types),
    )


def _gemma3_text(f: _Fields) -> dict[str, Any]:
    # transformers models/gemma3/configuration_gemma3.py Gemma3TextConfig (v5): Gemma 2's
    # sandwich norms plus q_norm/k_norm (RMSNorm over head_dim, scaled by 1 + weight); the
    # window on all layers but every sliding_window_pattern-th (6). Every dimension has a
    # default (Gemma 3 image-text configs leave some out of text_config).
    if f.flag("use_bidirectional_attention", False):
        raise f.bad("use_bidirectional_attention", True,
                    "false (bidirectional Gemma 3 encoders are not supported)")
    num_layers = f.integer("num_hidden_layers", 26)
    pattern = f.integer("sliding_window_pattern", 6)
    default_types = [
        "sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(num_layers)
    ]
    bias = f.flag("attention_bias", False)
    return {
        "arch": "decoder",
        "mlp": "gated",
        "norm": "rmsnorm",
        "position": "rope",
        "vocab_size": f.integer("vocab_size", 262_208),
        "hidden_size": f.integer("hidden_size", 2304),
        "num_layers": num_layers,
        "num_heads": f.integer("num_attention_heads", 8),
        "intermediate_size": f.integer("intermediate_size", 9216),
        "num_kv_heads": f.integer("num_key_value_heads", 4),
        "head_dim": f.integer("head_dim", 256),
        "activation": f.activation("hidden_activation", "gelu_pytorch_tanh"),
        "max_position_embeddings": f.integer("max_position_embeddings", 131_072),
        "tie_embeddings": f.flag("tie_word_embeddings", True),
        "qkv_bias": bias,
        "out_bias": bias,
        "norms_per_layer": 4,
        "qk_norm": "head",
        "attention_dropout": f.number("attention_dropout", 0.0),
        **_sliding(f, num_layers, f.opt_integer("sliding_window", 4096), default_types),
    }


def _phi3(f: _Fields) -> dict[str, Any]:
    return _rope_decoder(
        f,
        num_kv_heads=f.opt_integer("num_key_value_heads"),
        head_dim=_head_dim(f),
        activation=f.activation("hidden_act", "silu"),
        max_position_embeddings=f.integer("max_position_embeddings", 4096),
        tie_embeddings=f.flag("tie_word_embeddings", False),
        **_sliding_all_layers(f, None),
    )


def _bert(f: _Fields) -> dict[str, Any]:
    # Counted as BertForMaskedLM: no pooler; MLM head (dense + LayerNorm + decoder bias).
    if f.flag("add_cross_attention", False) or f.flag("is_decoder", False):
        raise f.bad("is_decoder", True, "false (BERT as a decoder is not supported)")
    return {
        "arch": "encoder",
        "vocab_size": f.integer("vocab_size"),
        "hidden_size": f.integer("hidden_size"),
        "num_layers": f.integer("num_hidden_layers"),
        "num_heads": f.integer("num_attention_heads"),
        "intermediate_size": f.integer("intermediate_size"),
        "mlp": "plain",
        "activation": f.activation("hidden_act", "gelu"),
        "norm": "layernorm",
        "position": "learned",
        "max_position_embeddings": f.integer("max_position_embeddings", 512),
        "type_vocab_size": f.integer("type_vocab_size", 2, minimum=0),
        "tie_embeddings": f.flag("tie_word_embeddings", True),
        "qkv_bias": True,
        "out_bias": True,
        "mlp_bias": True,
        "final_norm": False,
        "embedding_norm": True,
        "pooler": False,
        "mlm_head": True,
        "hidden_dropout": f.number("hidden_dropout_prob", 0.1),
        "attention_dropout": f.number("attention_probs_dropout_prob", 0.1),
        "embedding_dropout": f.number("hidden_dropout_prob", 0.1),
    }


def _opt(f: _Fields) -> dict[str, Any]:
    d = f.integer("hidden_size")
    proj = f.integer("word_embed_proj_dim", d)
    if proj != d:
        raise f.bad("word_embed_proj_dim", proj, f"equal to hidden_size ({d}); OPT-350m's "
                    "projected embeddings are not supported")
    if not f.flag("do_layer_norm_before", True):
        raise f.bad("do_layer_norm_before", False, "true (post-norm OPT is not supported)")
    bias = f.flag("enable_bias", True)
    return {
        "arch": "decoder",
        "vocab_size": f.integer("vocab_size"),
        "hidden_size": d,
        "num_layers": f.integer("num_hidden_layers"),
        "num_heads": f.integer("num_attention_heads"),
        "intermediate_size": f.integer("ffn_dim"),
        "mlp": "plain",
        "activation": f.activation("activation_function", "relu"),
        "norm": "layernorm",
        "position": "learned",
        "max_position_embeddings": f.integer("max_position_embeddings", 2048),
        "position_offset": 2,  # OPTLearnedPositionalEmbedding keeps 2 extra rows
        "tie_embeddings": f.flag("tie_word_embeddings", True),
        "qkv_bias": bias,
        "out_bias": bias,
        "mlp_bias": bias,
        "hidden_dropout": f.number("dropout", 0.1),
        "attention_dropout": f.number("attention_dropout", 0.0),
    }


_CONVERTERS: Final[dict[str, Callable[[_Fields], dict[str, Any]]]] = {
    "bert": _bert,
    "bloom": _bloom,
    "cohere": _cohere,
    "deepseek_v3": _deepseek_v3,
    "falcon": _falcon,
    "gemma": _gemma,
    "gemma2": _gemma2,
    "gemma3_text": _gemma3_text,
    "gpt2": _gpt2,
    "gpt_bigcode": _gpt_bigcode,
    "gpt_neox": _gpt_neox,
    "gptj": _gptj,
    "granite": _granite,
    "llama": _llama,
    "mistral": _mistral,
    "mixtral": _mixtral,
    "mpt": _mpt,
    "nemotron": _nemotron,
    "olmo": _olmo,
    "olmo2": _olmo2,
    "olmo3": _olmo3,
    "opt": _opt,
    "phi": _phi,
    "phi3": _phi3,
    "qwen2": _qwen2,
    "qwen2_moe": _qwen2_moe,
    "qwen3": _qwen3,
    "qwen3_moe": _qwen3_moe,
    "stablelm": _stablelm,
    "starcoder2": _starcoder2,
}

SUPPORTED_MODEL_TYPES: Final[tuple[str, ...]] = tuple(sorted(_CONVERTERS))


def spec_from_hf_dict(
    cfg: Mapping[str, Any], name: str, *, origin: str = "config.json", source: str | None = None
) -> ModelSpec:
    """A ModelSpec from the contents of a Hugging Face config.json (already parsed)."""
    if not isinstance(cfg, Mapping):
        raise GpuplanError(f"{origin}: expected a JSON object at the top level")
    model_type = cfg.get("model_type")
    supported = ", ".join(SUPPORTED_MODEL_TYPES)
    if model_type is None:
        raise GpuplanError(f"{origin}: field 'model_type' is missing; expected one of: {supported}")
    if isinstance(model_type, str) and model_type in _TEXT_PART_OF:
        return _language_model(cfg, name, origin, source)
    converter = _CONVERTERS.get(model_type) if isinstance(model_type, str) else None
    if converter is None:
        raise InputError(f"{origin}: field 'model_type'", model_type,
                         f"one of: {supported}, " + ", ".join(sorted(_TEXT_PART_OF)))
    fields = converter(_Fields(cfg, origin, model_type))
    record = {
        "name": name,
        "family": model_type,
        "source": source if source is not None else origin,
        **FAMILY_TRAITS.get(model_type, {}),
        **{k: v for k, v in fields.items() if v is not None},
    }
    return model_from_record(record, origin)


# image-text model_types whose language model is planned: its text_config's model_type
_TEXT_PART_OF: Final[dict[str, str]] = {"gemma3": "gemma3_text"}


def _language_model(
    cfg: Mapping[str, Any], name: str, origin: str, source: str | None
) -> ModelSpec:
    """The language model of an image-text config (Gemma 3 4B-27B: Gemma3ForConditional-
    Generation); the vision tower and projector are not counted, and the source says so."""
    model_type = str(cfg["model_type"])
    text = cfg.get("text_config") or {}
    if not isinstance(text, Mapping):
        raise GpuplanError(f"{origin}: field 'text_config' must be a JSON object")
    text_type = _TEXT_PART_OF[model_type]
    if text.get("model_type", text_type) != text_type:
        raise InputError(f"{origin}: field 'text_config.model_type'", text.get("model_type"),
                         f"{text_type!r} (model_type {model_type})")
    note = f"{source if source is not None else origin} (language model of a {model_type} " \
        "image-text config; the vision tower is not counted)"
    return spec_from_hf_dict({**text, "model_type": text_type}, name,
                             origin=f"{origin} text_config", source=note)


def _name_for(path: Path) -> str:
    """The folder name; in the HF hub cache (models--org--name/snapshots/<hash>/): org/name."""
    parent = path.parent
    if parent.parent.name == "snapshots" and parent.parent.parent.name.startswith("models--"):
        return parent.parent.parent.name[len("models--"):].replace("--", "/")
    return parent.name or "custom"


def load_hf_config(path: Path) -> ModelSpec:
    """Read a Hugging Face config.json and convert it (see `spec_from_hf_dict`)."""
    cfg = load_json(path, "model config.json")
    return spec_from_hf_dict(cfg, _name_for(path), origin=str(path))
