"""The meta-device tracer (gpuplan.ops.tracer) against PyTorch itself.

* FLOPs: equal to torch.utils.flop_counter.FlopCounterMode run on the same model with real CPU
  tensors, forward and forward+backward (HF models with eager attention, whose matmuls
  FlopCounterMode sees as bmm/mm/addmm).
* CPU SDPA: FlopCounterMode counts 0 for `_scaled_dot_product_flash_attention_for_cpu`; the
  tracer counts it by hand.
* Saved activations: equal to what a REAL CPU training step keeps for backward, measured with
  torch.autograd.graph.saved_tensors_hooks (each storage once by data_ptr, parameters excluded).

All models are tiny (2 layers, d=64) so the file runs in a few seconds.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

import gpuplan  # noqa: E402
from gpuplan.ops.tracer import trace  # noqa: E402

transformers.logging.set_verbosity_error()

VOCAB = 1000


# ---- helpers -------------------------------------------------------------------------------


def _loss_of(out: Any) -> Any:
    loss = getattr(out, "loss", None)
    return loss if loss is not None else out.sum()


def flop_counter(model: Any, *args: Any, train: bool = True, **kwargs: Any) -> int:
    """FlopCounterMode's total for a real CPU forward (and backward from the loss / sum)."""
    counter = FlopCounterMode(display=False)
    with counter:
        out = model(*args, **kwargs)
        if train:
            _loss_of(out).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def real_saved_bytes(model: Any, **kwargs: Any) -> int:
    """Bytes a real CPU forward keeps for backward: every storage packed by autograd, once
    (by data_ptr), parameters excluded. Then runs backward so the graph is consumed."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t: Any) -> Any:
        key = t.untyped_storage().data_ptr()
        if key not in params and key not in seen:
            seen[key] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(**kwargs)
    _loss_of(out).backward()
    model.zero_grad(set_to_none=True)
    return sum(seen.values())


def gpt2_config(dropout: bool = True, layers: int = 2) -> Any:
    extra = {} if dropout else {"resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}
    return transformers.GPT2Config(n_layer=layers, n_embd=64, n_head=4, vocab_size=VOCAB,
                                   n_positions=128, bos_token_id=0, eos_token_id=0, **extra)


def llama_config(layers: int = 2) -> Any:
    return transformers.LlamaConfig(num_hidden_layers=layers, hidden_size=64,
                                    num_attention_heads=4, num_key_value_heads=2,
                                    intermediate_size=128, vocab_size=VOCAB)


def mixtral_config() -> Any:
    return transformers.MixtralConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                      num_key_value_heads=2, intermediate_size=128,
                                      vocab_size=VOCAB, num_local_experts=4,
                                      num_experts_per_tok=2)


def bert_config() -> Any:
    return transformers.BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                   intermediate_size=256, vocab_size=VOCAB)


CONFIGS = {
    "gpt2": lambda: gpt2_config(dropout=True),
    "gpt2-nodrop": lambda: gpt2_config(dropout=False),
    "llama-gqa": llama_config,
    "mixtral": mixtral_config,
    "bert": bert_config,
}


def build(name: str, attn: str = "eager", dtype: Any = None, meta: bool = False) -> Any:
    cfg = CONFIGS[name]()
    dtype = dtype or torch.float32
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if meta:
            with torch.device("meta"):
                return _instantiate(name, cfg, attn, dtype)
        return _instantiate(name, cfg, attn, dtype)


def _instantiate(name: str, cfg: Any, attn: str, dtype: Any) -> Any:
    if name == "bert":
        return transformers.BertForMaskedLM._from_config(cfg, attn_implementation=attn,
                                                         dtype=dtype)
    return transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation=attn,
                                                         dtype=dtype)


def token_batch(b: int = 2, s: int = 16) -> tuple[Any, Any]:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (b, s), generator=g)
    return ids, ids.clone()  # distinct label storage (aliasing has its own test)


# ---- a) FLOPs equal FlopCounterMode ---------------------------------------------------------


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 64)
        self.fc2 = nn.Linear(64, 8)

    def forward(self, x: Any) -> Any:
        return self.fc2(F.gelu(self.fc1(x)))


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 16, 3, stride=2)
        self.head = nn.Linear(16 * 7 * 7, 10)

    def forward(self, x: Any) -> Any:
        y = F.relu(self.c2(F.relu(self.c1(x))))
        return self.head(y.flatten(1))


SMALL = {
    "linear": (lambda: nn.Linear(16, 32), lambda: torch.randn(8, 16)),
    "linear-3d": (lambda: nn.Linear(16, 32, bias=False), lambda: torch.randn(2, 5, 16)),
    "mlp": (MLP, lambda: torch.randn(4, 16)),
    # the input needs no gradient: the first conv's backward skips grad_input (output_mask
    # [False, True, True], a None output)
    "convnet": (ConvNet, lambda: torch.randn(2, 3, 16, 16)),
    "convnet-dx": (ConvNet, lambda: torch.randn(2, 3, 16, 16).requires_grad_()),
}


@pytest.mark.parametrize("name", list(SMALL))
def test_small_modules_match_flop_counter(name: str) -> None:
    make, inp = SMALL[name]
    torch.manual_seed(0)
    model, x = make(), inp()
    fwd = trace(model, x, train=False)
    assert fwd.forward_flops == flop_counter(model, x, train=False)
    assert fwd.backward_flops == 0
    full = trace(model, x)
    assert full.forward_flops == fwd.forward_flops
    assert full.train_flops == flop_counter(model, x)
    assert full.uncounted_ops == {}


@pytest.mark.parametrize("name", ["gpt2", "llama-gqa"])
def test_hf_eager_matches_flop_counter(name: str) -> None:
    model = build(name, "eager")
    ids, labels = token_batch()
    tr = trace(model, input_ids=ids, labels=labels)
    assert tr.forward_flops == flop_counter(model, train=False, input_ids=ids, labels=labels)
    assert tr.train_flops == flop_counter(model, input_ids=ids, labels=labels)
    # eager attention is bmm/matmul: the backward of every matmul is two matmuls
    assert tr.backward_flops == 2 * tr.forward_flops


# ---- b) CPU SDPA is counted -----------------------------------------------------------------


class SDPA(nn.Module):
    def __init__(self, causal: bool) -> None:
        super().__init__()
        self.causal = causal

    def forward(self, q: Any, k: Any, v: Any) -> Any:
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)


@pytest.mark.parametrize("causal", [False, True])
def test_cpu_sdpa_is_counted(causal: bool) -> None:
    b, h, s, d = 2, 3, 16, 8
    q, k, v = (torch.randn(b, h, s, d, requires_grad=True) for _ in range(3))
    # FlopCounterMode has no formula for the CPU flash kernel: it reports 0
    with FlopCounterMode(display=False) as counter:
        F.scaled_dot_product_attention(q, k, v, is_causal=causal).sum().backward()
    assert counter.get_total_flops() == 0
    tr = trace(SDPA(causal), q, k, v, target="cpu")
    # forward: QK^T and PV, 2*b*h*s*s*d each -> 4*b*h*s^2*d
    assert tr.forward_flops == 4 * b * h * s * s * d == 49152
    # causal: query i sees i + 1 keys, (s + 1)/2 on average: useful = full x (s + 1)/(2s)
    assert tr.useful_forward_flops == (tr.forward_flops * (s + 1) / (2 * s) if causal
                                       else tr.forward_flops)
    # backward: 2*b*h*s^2*(3d + 2d) = 2.5x the forward
    assert tr.backward_flops == 2 * b * h * s * s * 5 * d
    kinds = {o.name: o.kind for o in tr.ops}
    assert kinds["_scaled_dot_product_flash_attention_for_cpu"] == "attention"


# ---- c) saved activations equal a real CPU step ------------------------------------------------

SAVED_CASES = [(n, a, d) for n in CONFIGS for a in ("eager", "sdpa") for d in ("fp32", "bf16")]


@pytest.mark.parametrize(("name", "attn", "dtype"), SAVED_CASES,
                         ids=[f"{n}-{a}-{d}" for n, a, d in SAVED_CASES])
def test_saved_bytes_equal_real_cpu_step(name: str, attn: str, dtype: str) -> None:
    torch_dtype = torch.float32 if dtype == "fp32" else torch.bfloat16
    model = build(name, attn, torch_dtype)
    model.train()
    ids, labels = token_batch()
    torch.manual_seed(2)
    real = real_saved_bytes(model, input_ids=ids, labels=labels)
    param = next(model.parameters())
    before = param.detach().clone()
    tr = trace(model, input_ids=ids, labels=labels)
    # the real module was traced without being moved or modified
    assert param.device.type == "cpu"
    assert next(model.parameters()) is param
    assert torch.equal(param, before)
    assert param.grad is None
    assert tr.param_count == sum(p.numel() for p in model.parameters())
    assert tr.saved_activation_bytes == real  # exact, fp32 and bf16


def test_cpu_layernorm_stats_in_input_dtype() -> None:
    """The CPU LayerNorm keeps bf16 mean/rstd (the meta kernel says fp32); the tracer
    emulates the CPU."""
    ln = nn.LayerNorm(64).to(torch.bfloat16)
    x = torch.randn(32, 64, dtype=torch.bfloat16, requires_grad=True)
    seen: dict[int, int] = {}

    def pack(t: Any) -> Any:
        if not isinstance(t, nn.Parameter):
            seen.setdefault(t.untyped_storage().data_ptr(), t.untyped_storage().nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        ln(x)
    x_bytes = 32 * 64 * 2  # LayerNorm keeps its input x too; count only the statistics
    real = sum(seen.values()) - x_bytes
    assert real == 2 * 32 * 2  # CPU: mean and rstd, 32 rows, bf16
    tr = trace(ln, x, target="cpu")
    assert tr.saved_activation_bytes - x_bytes == real


def test_aliased_inputs_count_once() -> None:
    """One CPU tensor passed twice (input_ids=ids, labels=ids) is one storage."""
    model = build("bert", "eager")
    ids, _ = token_batch()
    real = real_saved_bytes(model, input_ids=ids, labels=ids)
    assert trace(model, input_ids=ids, labels=ids).saved_activation_bytes == real


def test_trace_restores_module_state() -> None:
    model = build("gpt2", "eager")
    model.eval()
    hooks = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())
    ids, labels = token_batch()
    trace(model, input_ids=ids, labels=labels)
    assert not model.training  # train() mode restored
    assert hooks == sum(len(m._forward_hooks) + len(m._forward_pre_hooks)
                        for m in model.modules())
    assert all(p.device.type == "cpu" and p.grad is None for p in model.parameters())


# ---- d) a model on meta: the 7B shape ---------------------------------------------------------


def test_llama_7b_on_meta() -> None:
    cfg = transformers.LlamaConfig(hidden_size=4096, num_hidden_layers=32,
                                   num_attention_heads=32, intermediate_size=11008,
                                   vocab_size=32000)
    start = time.perf_counter()
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    ids = torch.randint(0, 32000, (1, 128))
    tr = gpuplan.trace(model, input_ids=ids, labels=ids.clone())
    elapsed = time.perf_counter() - start
    assert tr.param_count == 6_738_415_616
    assert tr.param_bytes == 4 * 6_738_415_616  # fp32
    # forward ~ 2 x (params - embedding table) x tokens + attention
    matmul_params = 6_738_415_616 - 32000 * 4096 - 65 * 4096
    attn = 32 * 4 * 32 * 128 * 128 * 128
    assert tr.forward_flops == 2 * matmul_params * 128 + attn
    # (default sdpa attention) matmuls: backward 2x; attention core: 2.5x
    assert tr.backward_flops == 2 * (tr.forward_flops - attn) + 2.5 * attn
    assert tr.saved_activation_bytes > 0
    assert elapsed < 30  # a few seconds in practice


# ---- e) train flag, backward roots, per-module breakdown, layer aggregation ------------------


def test_inference_has_no_backward() -> None:
    model = build("llama-gqa", "eager")
    ids, _ = token_batch()
    tr = trace(model, input_ids=ids, train=False)
    assert len(tr.ops.phase("backward")) == 0
    assert tr.backward_flops == 0
    assert tr.saved_activation_bytes == 0
    assert tr.forward_flops > 0


def test_non_scalar_output_backward_uses_sum() -> None:
    lin = nn.Linear(4, 3)
    x = torch.randn(5, 4)
    tr = trace(lin, x)  # output [5, 3]: backward of out.sum()
    assert len(tr.ops.phase("backward")) > 0
    # x needs no gradient: only the weight gradient, x^T dY = 2*4*5*3 = forward
    assert tr.forward_flops == tr.backward_flops == 2 * 5 * 4 * 3
    tr_dx = trace(lin, x.requires_grad_())
    assert tr_dx.backward_flops == 2 * tr_dx.forward_flops  # plus dX = dY W


def test_module_breakdown() -> None:
    model = build("llama-gqa", "eager")
    ids, labels = token_batch()
    tr = trace(model, input_ids=ids, labels=labels)
    mods = tr.modules
    assert mods[""].forward_flops == tr.forward_flops
    assert mods[""].backward_flops == tr.backward_flops
    assert mods[""].saved_activation_bytes == tr.saved_activation_bytes
    assert mods[""].param_bytes == tr.param_bytes
    for name, stats in mods.items():
        if not name:
            continue
        parent = name.rsplit(".", 1)[0] if "." in name else ""
        assert stats.forward_flops <= mods[parent].forward_flops, name
        assert stats.backward_flops <= mods[parent].backward_flops, name
        assert stats.saved_activation_bytes <= mods[parent].saved_activation_bytes, name
        assert stats.param_bytes <= mods[parent].param_bytes, name
    # a leaf: q_proj of layer 0 is a [32, 64] @ [64, 64] matmul
    assert mods["model.layers.0.self_attn.q_proj"].forward_flops == 2 * 32 * 64 * 64
    assert mods["model.layers.0"].forward_flops == mods["model.layers.1"].forward_flops
    assert mods["lm_head"].forward_flops == 2 * 32 * 64 * VOCAB


class Stack(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(n))

    def forward(self, x: Any) -> Any:
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x


def test_repeated_layers_are_aggregated() -> None:
    tr = trace(Stack(3), torch.randn(4, 8))
    fwd = {o.name: o for o in tr.ops.phase("forward")}
    assert fwd["layers.*.addmm"].count == 3
    assert fwd["tanh"].count == 3  # run by Stack itself, on identical shapes
    assert fwd["layers.*.addmm"].layer == "layer"
    assert not any(".0." in o.name or ".1." in o.name for o in tr.ops)
    assert tr.forward_flops == 3 * 2 * 4 * 8 * 8

    with torch.device("meta"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = transformers.AutoModelForCausalLM.from_config(llama_config(layers=3))
    ids, labels = token_batch()
    tr = trace(model, input_ids=ids, labels=labels)
    counts = {o.name: o.count for o in tr.ops}
    assert any(n.startswith("model.layers.*") and c == 3 for n, c in counts.items())
    assert all(c % 3 == 0 for n, c in counts.items() if n.startswith("model.layers.*.self_attn"))


# ---- f) bytes -----------------------------------------------------------------------------------


def test_mm_bytes() -> None:
    m, k, n = 6, 10, 12
    tr = trace(nn.Linear(k, n, bias=False), torch.randn(m, k), train=False)
    (mm,) = [o for o in tr.ops if o.name.endswith("mm")]
    assert mm.kind == "matmul"
    assert mm.bytes_read == (m * k + k * n) * 4  # X and W read once (W^T is a free view)
    assert mm.bytes_written == m * n * 4
    assert mm.flops == 2 * m * k * n


def test_views_are_not_recorded() -> None:
    class Views(nn.Module):
        def forward(self, x: Any) -> Any:
            return (x.view(4, 6).t().reshape(2, 12).unsqueeze(0) * 2).sum()

    tr = trace(Views(), torch.randn(24, requires_grad=True))
    names = {o.name.removesuffix(".grad") for o in tr.ops}
    assert not names & {"view", "t", "reshape", "unsqueeze", "_unsafe_view", "transpose"}
    assert "mul" in names


def test_embedding_reads_only_its_rows() -> None:
    emb = nn.Embedding(1000, 16)
    ids = torch.randint(0, 1000, (2, 5))
    tr = trace(emb, ids)
    (op,) = [o for o in tr.ops.phase("forward") if o.name == "embedding"]
    # 10 int64 indices + the 10 rows of 16 fp32 it gathers, not the 1000 x 16 table
    assert op.bytes_read == 10 * 8 + 10 * 16 * 4
    assert op.bytes_written == 10 * 16 * 4
    assert op.kind == "embedding" and op.flops == 0
