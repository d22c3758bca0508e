"""ModelSpec: a validated description of a transformer architecture, and its exact parameter count.

Covers dense GPT-2 style (learned positions, LayerNorm, GELU MLP, tied embeddings), Llama style
(RoPE, RMSNorm, SwiGLU, GQA/MQA, untied embeddings), attention biases (Qwen2), Gemma 2 sandwich
norms, query/key norms (Qwen3, OLMo 2), parallel attention and MLP (GPT-J, GPT-NeoX, Falcon),
partial rotary, ALiBi models (no position parameters: BLOOM, MPT), mixture-of-experts (Mixtral;
DeepSeek-V3 with shared experts and multi-head latent attention) and encoder-only models (BERT).
Parameter counts equal what the Hugging Face implementation instantiates (checked in tests
against real `transformers` models on meta).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpuplan.specs.limits import check_model_record

Activation = Literal["gelu", "gelu_tanh", "gelu_new", "relu", "silu"]
"""gelu: exact erf GELU; gelu_tanh: tanh approximation in one fused kernel (F.gelu(approximate=
'tanh')); gelu_new: the same function written out in Python ops (HF NewGELUActivation, GPT-2),
which launches several kernels and keeps four tensors for backward."""


_SOFTMAX_FP32 = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "gemma", "gemma2", "phi3",
                 "deepseek_v3", "qwen3", "qwen3_moe", "gpt_neox", "gpt_bigcode", "starcoder2",
                 "olmo", "olmo2", "phi", "gptj", "stablelm", "granite", "nemotron", "cohere",
                 "gemma3_text", "bloom", "mpt")
_FUSED_QKV = ("gpt2", "phi3", "gpt_neox", "falcon", "gpt_bigcode", "bloom", "mpt")
_LAYERNORM_KERNEL = {"olmo": "fp32_copy", "cohere": "fp32_ops"}
FAMILY_TRAITS: dict[str, dict[str, bool | str]] = {
    f: {"softmax_fp32": f in _SOFTMAX_FP32, "fused_qkv": f in _FUSED_QKV,
        "fused_gate_up": f == "phi3", "norm_plus_one": f in ("gemma", "gemma2", "gemma3_text", "nemotron"),
        "layernorm_kernel": _LAYERNORM_KERNEL.get(f, "native"),
        "position_ids_buffer": f == "bert", "qk_norm_per_head_modules": f == "stablelm",
        "norm_weight_fp32": f == "olmo2", "qk_norm_over_projection": f == "olmo2",
        "rope_tables_fp32": f in ("olmo", "olmo2"),
        "rope_concat": f in ("gpt_neox", "phi", "stablelm", "nemotron")}
    for f in (*_SOFTMAX_FP32, "gpt2", "bert", "opt", "falcon")
}
"""Implementation traits of each supported Hugging Face model_type (transformers 4.x/5.x
modeling files): what a config importer sets unless the spec says otherwise."""

IMPORTER_ONLY_TRAITS = ("bloom", "mpt", "nemotron", "olmo2")
"""Families whose traits only the config.json importer sets: the training benchmarks build
BLOOM-176B (Megatron-DeepSpeed), MPT (llm-foundry), Nemotron-4 (NeMo) and OLMo-core specs
under these family names, and those runs do not use the Hugging Face modeling code."""


class ModelSpec(BaseModel):
    """A transformer; one docstring line per field, every size in elements (not bytes)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="preset name or a name derived from the config file")
    family: str = Field(description="HF model_type it corresponds to: gpt2, llama, mixtral, bert...")
    arch: Literal["decoder", "encoder"] = Field(default="decoder", description="causal LM or encoder")
    source: str | None = Field(default=None, description="where the architecture numbers come from")
    source_url: str | None = None
    source_date: str | None = None

    vocab_size: int = Field(gt=0)
    hidden_size: int = Field(gt=0, description="d_model")
    num_layers: int = Field(gt=0)
    num_heads: int = Field(gt=0, description="query heads")
    num_kv_heads: int | None = Field(default=None, gt=0, description="K/V heads (GQA/MQA); = heads")
    head_dim: int | None = Field(default=None, gt=0, description="per head; default hidden/heads")
    intermediate_size: int = Field(gt=0, description="dense MLP inner size")
    mlp: Literal["plain", "gated"] = Field(default="plain", description="gated = SwiGLU/GeGLU")
    activation: Activation = "gelu"
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    norm_affine: Literal["weight_bias", "weight", "none"] = Field(default="weight_bias", description=(
        "LayerNorm's learned parts: weight and bias; weight only (Cohere); none (OLMo 1)."
        " RMSNorm always has a weight"))
    norms_per_layer: int = Field(default=2, ge=1, le=4, description=(
        "Gemma 2 sandwich norms: 4; one norm shared by parallel attention and MLP (GPT-J,"
        " Falcon-7B, Phi-2): 1"))
    parallel_residual: bool = Field(default=False, description=(
        "attention and MLP both read the layer input, x + attn(ln1 x) + mlp(ln2 x) (GPT-J,"
        " GPT-NeoX, Falcon): the same matmuls; a second norm keeps no second copy of x"))
    rotary_dim: int | None = Field(default=None, gt=0, description=(
        "head dims RoPE rotates (partial rotary: GPT-NeoX rotary_pct, GPT-J rotary_dim);"
        " default all"))
    qk_norm: Literal["none", "head", "all_heads"] = Field(default="none", description=(
        "norm on queries and keys before RoPE: one head_dim weight shared by the heads (Qwen3)"
        " or one weight per head element (OLMo 2, StableLM 2); weight only"))
    position: Literal["learned", "rope", "none"] = "rope"
    max_position_embeddings: int = Field(default=2048, gt=0)
    position_offset: int = Field(default=0, ge=0, description="extra position rows (OPT: 2)")
    tie_embeddings: bool = Field(default=False, description="LM head shares the embedding matrix")
    qkv_bias: bool = Field(default=False, description="bias on Q, K, V projections")
    out_bias: bool = Field(default=False, description="bias on the attention output projection")
    mlp_bias: bool = Field(default=False, description="bias on MLP projections")
    lm_head_bias: bool = Field(default=False, description="bias on the LM head (GPT-J, Phi-2)")
    final_norm: bool = Field(default=True, description="norm after the last layer (decoders)")
    hidden_dropout: float = Field(default=0.0, ge=0, lt=1, description="after attn/MLP outputs")
    attention_dropout: float = Field(default=0.0, ge=0, lt=1, description="on attention probs")
    embedding_dropout: float = Field(default=0.0, ge=0, lt=1, description="after the embeddings")
    sliding_window: int | None = Field(
        default=None, gt=0, description="local attention window (Mistral v0.1, Gemma 2); None = full"
    )
    sliding_window_every: int = Field(
        default=1, ge=1, description="1 = every layer uses the window; 2 = every other (Gemma 2)"
    )
    full_attention_every: int = Field(default=0, ge=0, description=(
        "0 = unused; k: layers k-1, 2k-1, ... attend fully, all others use the window"
        " (Gemma 3: 6); replaces sliding_window_every"))

    # Encoder-only (BERT) extras
    type_vocab_size: int = Field(default=0, ge=0, description="token-type embeddings (BERT: 2)")
    embedding_norm: bool = Field(default=False, description="LayerNorm after embeddings (BERT)")
    pooler: bool = Field(default=False, description="BERT pooler: dense d x d + tanh")
    mlm_head: bool = Field(default=False, description="BERT MLM head: dense + LayerNorm + bias")

    # Mixture of experts
    num_experts: int = Field(default=0, ge=0, description="routed experts; 0 = dense model")
    experts_per_token: int = Field(default=0, ge=0, description="top-k routed experts per token")
    moe_intermediate_size: int | None = Field(default=None, gt=0, description="per expert")
    num_shared_experts: int = Field(default=0, ge=0, description="always-on experts (DeepSeek)")
    first_dense_layers: int = Field(default=0, ge=0, description="leading layers with a dense MLP")
    router_bias_params: bool = Field(
        default=False, description="per-expert routing bias counted as parameters (DeepSeek-V3)"
    )
    shared_expert_gate: bool = Field(
        default=False, description="sigmoid gate d x 1 on the shared expert (Qwen2-MoE)"
    )

    # Multi-head latent attention (DeepSeek-V2/V3)
    q_lora_rank: int | None = Field(default=None, gt=0, description="MLA query compression rank")
    kv_lora_rank: int | None = Field(default=None, gt=0, description="MLA KV latent rank; None=MHA")
    qk_nope_head_dim: int | None = Field(default=None, gt=0)
    qk_rope_head_dim: int | None = Field(default=None, gt=0)
    v_head_dim: int | None = Field(default=None, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _bounded(cls, data: Any) -> Any:
        """Sizes within specs.limits' maxima, before anything is derived from them."""
        if isinstance(data, Mapping):
            check_model_record(data)
        return data

    # ---- implementation traits: how the reference (Hugging Face) code runs the architecture;
    # they change kernels and saved bytes, not parameter counts. A config importer sets them
    # from its model_type (FAMILY_TRAITS); a spec may set any of them explicitly.
    softmax_fp32: bool = Field(default=False, description=(
        "eager attention upcasts the softmax to fp32 (HF eager_attention_forward)"))
    fused_qkv: bool = Field(default=False, description=(
        "one fused Q/K/V projection (GPT-2 c_attn, Phi-3 qkv_proj)"))
    fused_gate_up: bool = Field(default=False, description=(
        "one fused gate/up projection (Phi-3 gate_up_proj)"))
    norm_plus_one: bool = Field(default=False, description=(
        "the norm scales by (1 + weight) (Gemma RMSNorm, Nemotron LayerNorm1P)"))
    layernorm_kernel: Literal["native", "fp32_copy", "fp32_ops"] = Field(
        default="native", description=(
            "how eager LayerNorm runs: PyTorch's native kernel; native on an fp32 copy of the"
            " input (HF OlmoLayerNorm); written out in fp32 ops (HF CohereLayerNorm)"))
    position_ids_buffer: bool = Field(default=False, description=(
        "position ids sliced from a registered buffer that stays saved whole (HF BERT)"))
    norm_weight_fp32: bool = Field(default=False, description=(
        "RMSNorm multiplies its weight in fp32, then casts (HF Olmo2RMSNorm)"))
    rope_tables_fp32: bool = Field(default=False, description=(
        "RoPE cos/sin stay fp32 and q, k are rotated in fp32 (HF Olmo2RotaryEmbedding)"))
    rope_concat: bool = Field(default=False, description=(
        "RoPE'd q, k rebuilt with torch.cat (partial rotary: HF GPT-NeoX, Phi): head-major"
        " contiguous, so the attention output is transposed back by a copy"))
    qk_norm_over_projection: bool = Field(default=False, description=(
        "query/key norms normalize the whole projection per token, not each head (OLMo 2)"))
    qk_norm_per_head_modules: bool = Field(default=False, description=(
        "query/key norms as one module per head (HF StableLmLayerNormPerHead)"))

    @model_validator(mode="before")
    @classmethod
    def _family_traits(cls, data: Any) -> Any:
        if isinstance(data, dict) and "family" in data:
            family = str(data["family"])
            traits = FAMILY_TRAITS.get(family, {}) if family not in IMPORTER_ONLY_TRAITS else {}
            data = {**{k: v for k, v in traits.items()}, **data}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> ModelSpec:
        kv = self.kv_heads
        if self.num_heads % kv != 0:
            raise ValueError(f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({kv})")
        if self.head_dim is None and not self.is_mla and self.hidden_size % self.num_heads != 0:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) is not divisible by num_heads ({self.num_heads});"
                " give head_dim"
            )
        if self.num_experts:
            if not 0 < self.experts_per_token <= self.num_experts:
                raise ValueError(
                    f"experts_per_token ({self.experts_per_token}) must be in 1..num_experts"
                    f" ({self.num_experts})"
                )
            if self.first_dense_layers > self.num_layers:
                raise ValueError("first_dense_layers exceeds num_layers")
        if self.is_mla and None in (self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim):
            raise ValueError("MLA (kv_lora_rank set) needs qk_nope_head_dim, qk_rope_head_dim, v_head_dim")
        if self.full_attention_every and self.sliding_window_every != 1:
            raise ValueError("give sliding_window_every or full_attention_every, not both")
        if self.arch == "encoder" and self.tie_embeddings is False and self.mlm_head:
            raise ValueError("the BERT MLM head ties its decoder to the embeddings: tie_embeddings=true")
        return self

    # ---- derived sizes -------------------------------------------------------------------
    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads or self.num_heads

    @property
    def head_size(self) -> int:
        """Q/K head dim (MLA: nope + rope part)."""
        if self.is_mla:
            return (self.qk_nope_head_dim or 0) + (self.qk_rope_head_dim or 0)
        return self.head_dim or self.hidden_size // self.num_heads

    @property
    def rope_dim(self) -> int:
        """Dims of each query/key head that RoPE rotates (MLA: the decoupled RoPE part)."""
        if self.is_mla:
            return self.qk_rope_head_dim or 0
        return min(self.rotary_dim or self.head_size, self.head_size)

    @property
    def v_head_size(self) -> int:
        return self.v_head_dim if self.is_mla and self.v_head_dim else self.head_size

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def expert_size(self) -> int:
        return self.moe_intermediate_size or self.intermediate_size

    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.first_dense_layers if self.is_moe else 0

    @property
    def num_dense_layers(self) -> int:
        return self.num_layers - self.num_moe_layers

    @property
    def num_sliding_layers(self) -> int:
        """Layers that attend only to the last `sliding_window` tokens."""
        return sum(1 for i in range(self.num_layers) if self.is_sliding_layer(i))

    def is_sliding_layer(self, layer: int) -> bool:
        """Whether layer `layer` (0-based) attends only within the window."""
        if self.sliding_window is None:
            return False
        if self.full_attention_every:
            return (layer + 1) % self.full_attention_every != 0
        return layer % self.sliding_window_every == 0

    def attended_tokens(self, context: int, sliding: bool) -> int:
        """Keys one query at position `context` attends to (the window caps it)."""
        if sliding and self.sliding_window is not None:
            return min(context, self.sliding_window)
        return context

    @property
    def causal(self) -> bool:
        return self.arch == "decoder"

    # ---- parameter counts (exact, per HF module structure) -----------------------------------
    @property
    def norm_vectors(self) -> int:
        """Learned vectors of one norm: LayerNorm weight and bias (per norm_affine), RMSNorm
        a weight."""
        if self.norm == "rmsnorm":
            return 1
        return {"weight_bias": 2, "weight": 1, "none": 0}[self.norm_affine]

    @property
    def norm_bias(self) -> bool:
        return self.norm_vectors == 2

    def norm_params(self) -> int:
        """One norm over hidden_size."""
        return self.norm_vectors * self.hidden_size

    def attention_params(self) -> int:
        """One attention block: projections (and MLA's latent norms)."""
        d, h = self.hidden_size, self.num_heads
        if self.is_mla:
            qk = self.head_size
            if self.q_lora_rank:  # q_a_proj, q_a_layernorm (RMSNorm), q_b_proj
                q = d * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * h * qk
            else:
                q = d * h * qk
            kv_rank = self.kv_lora_rank or 0
            kv = d * (kv_rank + (self.qk_rope_head_dim or 0)) + kv_rank
            kv += kv_rank * h * ((self.qk_nope_head_dim or 0) + self.v_head_size)
            o = h * self.v_head_size * d
            bias = 0
            if self.qkv_bias:  # HF attention_bias: q_a_proj, kv_a_proj_with_mqa, o_proj (rare)
                bias = (self.q_lora_rank or 0) + kv_rank + (self.qk_rope_head_dim or 0) + d
            return q + kv + o + bias
        hd, kvh = self.head_size, self.kv_heads
        q, kv, o = d * h * hd, 2 * d * kvh * hd, h * hd * d
        bias = (h * hd + 2 * kvh * hd if self.qkv_bias else 0) + (d if self.out_bias else 0)
        return q + kv + o + bias + self.qk_norm_params()

    def qk_norm_params(self) -> int:
        """Query and key norm weights of one layer (Qwen3 q_norm/k_norm over head_dim; OLMo 2
        over the whole projection)."""
        if self.qk_norm == "head":
            return 2 * self.head_size
        if self.qk_norm == "all_heads":
            return (self.num_heads + self.kv_heads) * self.head_size
        return 0

    def mlp_params(self, inner: int | None = None) -> int:
        """One dense MLP with inner size `inner` (default intermediate_size)."""
        d, f = self.hidden_size, inner or self.intermediate_size
        if self.mlp == "gated":
            return 3 * d * f + ((2 * f + d) if self.mlp_bias else 0)
        return 2 * d * f + ((f + d) if self.mlp_bias else 0)

    def moe_params(self) -> int:
        """One MoE block: router, routed experts, shared experts."""
        router = self.hidden_size * self.num_experts
        router += self.num_experts if self.router_bias_params else 0
        experts = self.num_experts * self.mlp_params(self.expert_size)
        shared = self.mlp_params(self.expert_size * self.num_shared_experts) if self.num_shared_experts else 0
        shared += self.hidden_size if self.shared_expert_gate else 0
        return router + experts + shared

    def moe_active_params(self) -> int:
        """MoE block parameters one token uses: router, top-k experts, shared experts."""
        router = self.hidden_size * self.num_experts
        router += self.num_experts if self.router_bias_params else 0
        routed = self.experts_per_token * self.mlp_params(self.expert_size)
        shared = self.mlp_params(self.expert_size * self.num_shared_experts) if self.num_shared_experts else 0
        shared += self.hidden_size if self.shared_expert_gate else 0
        return router + routed + shared

    def embedding_params(self) -> int:
        d = self.hidden_size
        n = self.vocab_size * d
        if self.position == "learned":
            n += (self.max_position_embeddings + self.position_offset) * d
        n += self.type_vocab_size * d
        if self.embedding_norm:
            n += self.norm_params()
        return n

    def head_params(self) -> int:
        """Final norm, LM head (untied) or BERT pooler and MLM head."""
        d = self.hidden_size
        n = self.norm_params() if self.final_norm else 0
        if not self.tie_embeddings:
            n += self.vocab_size * d
        n += self.vocab_size if self.lm_head_bias else 0
        if self.pooler:
            n += d * d + d
        if self.mlm_head:  # transform dense + LayerNorm + decoder bias (decoder weight tied)
            n += d * d + d + self.norm_params() + self.vocab_size
        return n

    def layer_params(self, moe: bool) -> int:
        block = self.moe_params() if moe else self.mlp_params()
        return self.attention_params() + block + self.norms_per_layer * self.norm_params()

    def params_breakdown(self) -> dict[str, int]:
        """Parameter count by component; sums to `params()`."""
        return {
            "embedding": self.embedding_params(),
            "attention": self.num_layers * self.attention_params(),
            "mlp": self.num_dense_layers * self.mlp_params() + self.num_moe_layers * self.moe_params(),
            "norms": self.num_layers * self.norms_per_layer * self.norm_params(),
            "head": self.head_params(),
        }

    def params(self) -> int:
        """Total parameters, as the Hugging Face implementation instantiates them."""
        return sum(self.params_breakdown().values())

    def active_params(self) -> int:
        """Parameters used per token (MoE: top-k and shared experts only); = params() if dense."""
        if not self.is_moe:
            return self.params()
        return self.params() - self.num_moe_layers * (self.moe_params() - self.moe_active_params())

    def param_tensors(self) -> int:
        """Number of parameter tensors in the Hugging Face module layout (optimizers keep a
        per-tensor step counter). Fused layouts: GPT-2 c_attn, Phi-3 qkv_proj/gate_up_proj,
        MoE experts as two stacked tensors (transformers >= 5)."""
        ln = self.norm_vectors
        fused_qkv = self.fused_qkv
        if self.is_mla:
            attn = (3 if self.q_lora_rank else 1) + 3 + 1
            attn += ((3 if self.q_lora_rank else 2) if self.qkv_bias else 0)  # q_a, kv_a, o biases
        elif fused_qkv:
            attn = 2 + (1 if self.qkv_bias else 0) + (1 if self.out_bias else 0)
        else:
            attn = 4 + (3 if self.qkv_bias else 0) + (1 if self.out_bias else 0)
        attn += self._qk_norm_tensors()
        gated_fused = self.fused_gate_up
        mlp = (2 if gated_fused else 3) if self.mlp == "gated" else 2
        mlp += mlp if self.mlp_bias else 0
        moe = 1 + 2 + (3 + (1 if self.shared_expert_gate else 0) if self.num_shared_experts
                       else 0)
        per_layer = attn + self.norms_per_layer * ln
        n = self.num_dense_layers * (per_layer + mlp) + self.num_moe_layers * (per_layer + moe)
        n += 1 + (1 if self.position == "learned" else 0) + (1 if self.type_vocab_size else 0)
        n += ln if self.embedding_norm else 0
        n += ln if self.final_norm else 0
        n += 0 if self.tie_embeddings else 1
        n += 1 if self.lm_head_bias else 0
        n += 2 if self.pooler else 0
        n += 2 + ln + 1 if self.mlm_head else 0
        return n

    def _qk_norm_tensors(self) -> int:
        """q_norm and k_norm weights; StableLM keeps one LayerNorm per head."""
        if self.qk_norm == "none":
            return 0
        if self.qk_norm == "all_heads" and self.qk_norm_per_head_modules:
            return self.num_heads + self.kv_heads
        return 2

    def non_embedding_params(self) -> int:
        """Parameters outside the token/position embeddings (Kaplan et al. 2020 convention)."""
        return self.params() - self.embedding_params()
