"""Serving latency: the time of one engine iteration (prompt tokens being prefilled plus decode
tokens attending to a KV cache) on one GPU of a tensor-parallel group, and the TTFT, TPOT and
end-to-end latency built from it.

Per iteration, every term placed on the roofline (Williams et al. 2009) by `roofline.op_time`:
- linear layers: FLOPs 2 x matrix params per token (Kaplan et al. 2020, §2.1), the LM head only
  for tokens that produce logits; bytes = the weights (at their stored dtype, group scales
  counted) read once per iteration, plus activations.
- MoE: each MoE layer reads the experts the batch touches, E x (1 - (1 - k/E)^T) for T tokens
  routing top-k (`ops.transformer.experts_touched`), not all E and not just k.
- attention: 4 x heads x head_dim FLOPs per (query, key) pair per layer; decode reads every
  cached K and V (FlashDecoding / PagedAttention); PagedAttention's kernel runs 20-26% slower
  than a contiguous one (Kwon et al. 2023, vLLM, §7.2): paged reads take 1.23x.
- quantized weights: native when the device has a tensor peak for the dtype (fp8, int8, fp4:
  W8A8 / NVFP4 kernels), else dequantized inside the matmul (weight-only, GPTQ/AWQ style):
  2 vector ops per weight element read and the matmul at the 16-bit rate.
- weight-only dequantization at small batch does not hide under the weight loads: its vector
  work adds to the memory time (gpt-fast README: the achieved bandwidth falls from ~1,420 GB/s
  at bf16 to ~1,070 at int8 and ~860 at int4 on the same A100, so the extra time grows with
  the weight elements, not the bytes).
- tensor parallelism: 2 all-reduces of the tokens' hidden states per layer (Megatron-LM,
  Shoeybi et al. 2019, §3), timed by `estimate.comm` (bandwidth) and, for small messages, by
  NCCL's low-latency (LL) protocol, as NCCL picks the faster one (NCCL src/graph/tuning.cc).
- overhead by execution mode: a serving engine replays its decode step as a CUDA graph
  (vLLM, TensorRT-LLM, SGLang, gpt-fast with torch.compile): only a GPU-side gap per kernel;
  eager PyTorch on a GPU dispatches each op from the host while earlier kernels run, so a step
  takes the longer of the GPU work and the host's dispatches; on a CPU the dispatch of every
  op adds to its work (one thread of control).
Every byte term divides by at most the datasheet (or measured) bandwidth, so a decode step is
never faster than bytes / bandwidth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache

from gpuplan.errors import InputError
from gpuplan.estimate.comm import collective_time, flat_time
from gpuplan.estimate.efficiency import Efficiency, default_efficiency
from gpuplan.estimate.inference import largest_true, weight_bytes
from gpuplan.estimate.roofline import op_time
from gpuplan.ops.blocks import DTYPE_BYTES
from gpuplan.ops.impl import Impl
from gpuplan.ops.op import Op
from gpuplan.ops.transformer import experts_touched, kv_bytes_per_token
from gpuplan.specs.cluster import default_cluster
from gpuplan.specs.device import Device
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.serving import ServeConfig
from gpuplan.specs.workload import InferConfig

NATIVE_QUANT = ("fp8", "int8", "fp4")
"""Weight dtypes that run as low-precision matmuls where the device has a tensor peak for them."""
DEQUANT_OPS_PER_WEIGHT = {"int8": 1.0, "fp8": 1.0, "int4": 2.0, "fp4": 2.0}
"""Vector instructions per weight element to dequantize it inside the matmul: 8-bit weights
carry one scale per output channel, applied to the output (gpt-fast quantize.py
WeightOnlyInt8Linear: linear(x, w.to(x.dtype)) * scales): a convert per weight; 4-bit weights
carry a scale and zero per group of 32-128 (GPTQ/AWQ, gpt-fast's int4 groups): convert plus a
fused multiply-add per weight. They issue at the FMA instruction rate, half the vector FLOP
peak (an FMA counts 2 FLOPs in the datasheet's FP32 figure)."""
FLOPS_PER_INSTRUCTION = 2.0
PAGED_KV_SLOWDOWN = 1.23
"""PagedAttention kernel vs a contiguous-cache kernel: 20-26% slower (Kwon et al. 2023, §7.2)."""
KERNELS_PER_LAYER = 9
"""Kernel launches per layer in a fused serving engine: norm x2, QKV, RoPE+cache write,
attention, out-proj, gate/up, activation, down (vLLM / TensorRT-LLM Llama graphs)."""
GRAPH_KERNEL_GAP_S = 0.5e-6
"""GPU-side time between consecutive kernels replayed from a CUDA graph: a chain of 2.9 µs
kernels runs at 3.4 µs per kernel as a graph (A. Gray, "Getting Started with CUDA Graphs",
NVIDIA Technical Blog, 2019); the host's per-launch cost is paid once per graph."""
NCCL_LL_BASE_S = 6.6e-6
NCCL_LL_STEP_S = {"nvlink": 0.6e-6, "pcie": 1.0e-6}
NCCL_LL_BW_SHARE = 0.25
"""NCCL's own cost model of a ring all-reduce with the LL protocol (src/graph/tuning.cc,
NVIDIA/nccl v2.28.7-1, ncclTunerConstantsDefaults): baseLat 6.6 µs + 2(n-1) steps x hwLat
(NVLink 0.6 µs, PCIe 1.0 µs), at a quarter of the ring's bus bandwidth (tuning.cc: LL busBw
x 1/4 for all-reduce); NCCL runs it when its modelled time beats the Simple protocol's."""

SERVING_FACTORS = (0.8, 0.7, 0.5)
"""(compute, extra for fp4 compute, attention KV reads): shares of the kernel ceilings a
serving engine's whole iteration reaches (sustained clocks, scheduling, sampling, kernel gaps;
paged decode-attention kernels reading scattered KV blocks), fitted by benchmarks/fit_serving.py
on the CALIBRATION family only (see SERVING_CALIBRATION). Weight reads keep the roofline's
memory ceiling: batch-1 decode (gpt-fast) reaches it without a serving loss."""
SERVING_CALIBRATION = ("fitted 2026-12-01 by benchmarks/fit_serving.py on TensorRT-LLM's "
                       "Llama-3.3-70B max-throughput rows only (40 rows, median |log error| "
                       "0.054); validated on its Llama-3.1-8B and 405B rows, its 1.x "
                       "Llama-3.3-70B rows at unseen lengths/TP and on gpt-fast")
SERVING_ATTENTION_KERNEL = "fa3"
"""Serving engines run the device's fastest fused attention: FlashAttention-3 on Hopper (vLLM's
vllm-flash-attn and SGLang's default there; TensorRT-LLM's warp-specialised Hopper FMHA is of
the same class), falling back to cuDNN, then FlashAttention-2 where the device file has no FA3
measurement (efficiency_attention.KERNEL_FALLBACK). At a 20,000-token prompt attention is
about a quarter of the prefill FLOPs of an 8B model, so the kernel matters there."""


def serving_efficiency(device: Device, compute_dtype: str,
                       factors: tuple[float, float, float] | None = None) -> Efficiency:
    """The roofline priors of `device` times the serving end-to-end factors."""
    c, c4, mem = factors or SERVING_FACTORS
    base = default_efficiency(device, SERVING_ATTENTION_KERNEL)
    f = c * (c4 if compute_dtype == "fp4" else 1.0)
    return replace(base, end_to_end=f,
                   source=base.source + f"; serving end-to-end: compute x{f:.2f}, attention "
                   f"KV reads x{mem:.2f} ({SERVING_CALIBRATION})")


@dataclass(frozen=True, eq=False)
class StepModel:
    """Coefficients of one iteration's time on one GPU; `time_s` is cheap (the simulator calls
    it once per event)."""

    device: Device
    eff: Efficiency
    cfg: ServeConfig
    dense_weight_bytes: float
    """weights read every iteration except routed experts (embedding table excluded)"""
    expert_bytes: float
    """one routed expert of one MoE layer on this GPU"""
    moe_layers: int
    experts: int
    top_k: int
    flops_per_token: float
    head_flops_per_logit: float
    attn_flops_per_pair: float
    kv_bytes_per_token: float
    act_bytes_per_token: float
    compute_dtype: str
    dequant_ops_per_weight_byte: float
    matmuls_per_step: int
    layers: int
    kernels_per_layer: float
    kv_read_factor: float
    """share of the attention kernels' memory roofline reached on KV reads"""
    allreduce_s: tuple[float, float]
    """(latency, seconds per token) of one layer's two all-reduces (NCCL Simple protocol)"""
    allreduce_ll_s: tuple[float, float] = (0.0, 0.0)
    """the same with NCCL's low-latency protocol (small messages)"""
    matmul_only_factor: float = 1.0
    """the fp4 share of the serving factors: FP4 GEMMs' own loss, not the attention kernels'
    (which run at 16 or 8 bits)"""
    execution: str = "graph"
    """graph (CUDA-graph replay), eager-gpu (host dispatch overlaps the GPU), eager-cpu
    (dispatch adds to the work)"""
    assumptions: dict[str, object] = field(default_factory=dict)

    @property
    def weight_read_bytes(self) -> float:
        return self.dense_weight_bytes + self.moe_layers * self.experts * self.expert_bytes

    def weights_touched(self, tokens: int) -> float:
        if not self.moe_layers:
            return self.dense_weight_bytes
        touched = min(self.experts, experts_touched(tokens, self.top_k, self.experts))
        return self.dense_weight_bytes + self.moe_layers * touched * self.expert_bytes

    def linear_s(self, tokens: int, logits: int) -> tuple[float, float]:
        """(compute, memory) seconds of the linear layers for `tokens` tokens."""
        return _linear_s(self, tokens, logits)

    def attention_s(self, pairs: float, kv_read_tokens: float, new_tokens: int) -> float:
        """Attention over `pairs` (query, key) pairs reading `kv_read_tokens` cached tokens
        and writing `new_tokens` into the cache."""
        if pairs <= 0:
            return 0.0
        slow = PAGED_KV_SLOWDOWN if self.cfg.attention == "paged" else 1.0
        read = (kv_read_tokens * slow + new_tokens) * self.kv_bytes_per_token
        flops_s, bytes_s = self.attention_rates
        return max(pairs * self.attn_flops_per_pair / flops_s, read / bytes_s)

    @property
    def attention_rates(self) -> tuple[float, float]:
        """(FLOP/s, bytes/s) of the attention kernels: the roofline of one large attention op
        (the KV reads of a serving batch are 10s of MB per layer: the size curves' plateau)."""
        return _attention_rates(self)

    def comm_s(self, tokens: int) -> float:
        """One iteration's tensor-parallel all-reduces: NCCL's faster protocol per message."""
        if self.cfg.tp <= 1:
            return 0.0
        (a, b), (c, d) = self.allreduce_s, self.allreduce_ll_s
        return self.layers * min(a + b * tokens, c + d * tokens)

    def overhead_s(self, tokens: int) -> float:
        """Communication plus the per-kernel cost on the GPU's timeline (graph gaps; on a CPU,
        each op's dispatch); eager host dispatch on a GPU is `dispatch_s`, overlapped."""
        kernels = self.layers * self.kernels_per_layer
        per = self.eff.kernel_overhead_s if self.execution == "eager-cpu" else GRAPH_KERNEL_GAP_S
        return self.comm_s(tokens) + kernels * per

    @property
    def dispatch_s(self) -> float:
        """Host time to dispatch one eager step's kernels (0 when a CUDA graph replays it)."""
        if self.execution != "eager-gpu":
            return 0.0
        return self.layers * self.kernels_per_layer * self.eff.kernel_overhead_s

    def time_s(self, decode_seqs: int, decode_ctx: float, prefill_tokens: int = 0,
               prefill_pairs: float = 0.0, prefill_logits: int = 0) -> float:
        """One iteration: `decode_seqs` sequences add a token after `decode_ctx` cached tokens
        in total; `prefill_tokens` prompt tokens attend over `prefill_pairs` (query, key)
        pairs and `prefill_logits` of them end a prompt (produce a first token)."""
        tokens = decode_seqs + prefill_tokens
        if tokens <= 0:
            return 0.0
        comp, mem = self.linear_s(tokens, decode_seqs + prefill_logits)
        attn = self.attention_s(decode_ctx + decode_seqs + prefill_pairs,
                                decode_ctx, tokens)
        gpu = max(comp, mem) + attn + self.overhead_s(tokens)
        return max(gpu, self.dispatch_s)


@lru_cache(maxsize=65536)
def _linear_cached(sm: StepModel, tokens: int) -> tuple[float, float, float]:
    """(compute s without the LM head, memory s, matmul FLOP/s reached) for `tokens` tokens;
    cached per token count (the simulator asks for the same counts again and again)."""
    wbytes = sm.weights_touched(tokens)
    flops = tokens * sm.flops_per_token
    n = sm.matmuls_per_step
    op = Op("linear", "matmul", flops / n, (wbytes + tokens * sm.act_bytes_per_token) / n, 0.0,
            sm.compute_dtype, "decode", count=n, kernels=0)
    t = op_time(op, sm.device, sm.eff)
    dequant = 0.0
    if sm.dequant_ops_per_weight_byte:
        vec = sm.eff.measured.get("fp32") or sm.device.peak("fp32") or \
            sm.device.matmul_peak("bf16")
        rate = vec * sm.eff.vector_ceiling / FLOPS_PER_INSTRUCTION
        dequant = wbytes * sm.dequant_ops_per_weight_byte / rate
    # dequantization is serial with the loads: it adds to both sides of the roofline
    return (t.compute_s + dequant, t.memory_s + dequant,
            flops / t.compute_s if t.compute_s else 1.0)


@lru_cache(maxsize=256)
def _attention_rates(sm: StepModel) -> tuple[float, float]:
    big = 1e12
    op = Op("attn.core", "attention", big, big, 0.0, sm.cfg.act_dtype, "decode", kernels=0)
    eff = replace(sm.eff, end_to_end=sm.eff.end_to_end / sm.matmul_only_factor)
    t = op_time(op, sm.device, eff)
    return big / t.compute_s, big / t.memory_s * sm.kv_read_factor


def _linear_s(sm: StepModel, tokens: int, logits: int) -> tuple[float, float]:
    comp, mem, rate = _linear_cached(sm, int(tokens))
    return comp + logits * sm.head_flops_per_logit / rate, mem


def step_model(m: ModelSpec, device: Device, cfg: ServeConfig, eff: Efficiency | None = None,
               factors: tuple[float, float, float] | None = None,
               ops_per_layer: float | None = None) -> StepModel:
    """Per-GPU coefficients of an iteration for `m` on `device` under `cfg`. Without `eff`:
    the device's priors times the serving factors; with it (a measured profile): as given.
    `ops_per_layer`: the ops an eager step really dispatches per layer, where counted (e.g.
    traced from Hugging Face); else the fused engine's kernels or the op builder's count."""
    cfg.validate(m)
    tp, d, wd = cfg.tp, m.hidden_size, cfg.weight_dtype
    icfg = InferConfig(batch=1, context=1, weight_dtype=wd, kv_dtype=cfg.kv_dtype, tp=tp)
    per_elem = Impl(weight_dtype=wd).weight_bytes()
    # the memory planner keeps embedding, head and norms 16-bit; fp32 checkpoints keep them fp32
    wide = DTYPE_BYTES[wd] > 2
    total = weight_bytes(m, replace(icfg, weight_dtype="bf16")) * 2 if wide else \
        weight_bytes(m, icfg)
    embed = m.vocab_size * d / tp * (4.0 if wide else 2.0) if not m.tie_embeddings else 0.0
    total -= embed
    expert = m.mlp_params(m.expert_size) * per_elem / tp if m.is_moe else 0.0
    dense = total - m.num_moe_layers * m.num_experts * expert
    head = 2.0 * d * m.vocab_size / tp
    body = 2.0 * (m.active_params() - m.embedding_params() - m.head_params()) / tp
    kv = kv_bytes_per_token(m, cfg.kv_dtype)
    if not m.is_mla:
        kv *= math.ceil(m.kv_heads / tp) / m.kv_heads
    full_layers = m.num_layers - m.num_sliding_layers // 2  # windows read less: an estimate
    if m.is_mla:
        pair = 2 * m.num_heads * ((m.kv_lora_rank or 0) * 2 + (m.qk_rope_head_dim or 0))
    else:
        pair = 2 * m.num_heads * (m.head_size + m.v_head_size)
    native = wd in NATIVE_QUANT and device.peak(wd) is not None and not cfg.weight_only
    quantized = DTYPE_BYTES[wd] < 2
    compute_dtype = wd if native else cfg.act_dtype
    kv_factor = 1.0 if eff is not None else (factors or SERVING_FACTORS)[2]
    fp4_factor = (factors or SERVING_FACTORS)[1] if eff is None and compute_dtype == "fp4" \
        else 1.0
    eff = eff or serving_efficiency(device, compute_dtype, factors)
    dequant = DEQUANT_OPS_PER_WEIGHT.get(wd, 2.0) / per_elem if quantized and not native \
        else 0.0
    ff = (m.expert_size * m.experts_per_token if m.is_moe else m.intermediate_size)
    act = m.num_layers * (8 * d + 3 * ff / tp) * DTYPE_BYTES[cfg.act_dtype]
    ar = _allreduce(device, tp, d * DTYPE_BYTES[cfg.act_dtype])
    ar_ll = _allreduce_ll(device, tp, d * DTYPE_BYTES[cfg.act_dtype])
    kernels = ops_per_layer or (KERNELS_PER_LAYER if cfg.fused
                                else eager_kernels_per_layer(m, cfg.act_dtype))
    execution = "graph" if cfg.fused else ("eager-cpu" if device.kind == "cpu" else "eager-gpu")
    assumptions: dict[str, object] = {
        "weight_dtype": wd, "kv_dtype": cfg.kv_dtype, "tp": tp, "attention": cfg.attention,
        "matmul_dtype": compute_dtype,
        "quantized_weights": ("native" if native else "dequantized in the matmul kernel "
                              f"({DEQUANT_OPS_PER_WEIGHT.get(wd, 2.0):g} vector instructions per weight, "
                              "serial with the loads)")
        if quantized else "16-bit",
        "moe_experts_read": "E x (1 - (1 - k/E)^tokens) per MoE layer" if m.is_moe else None,
        "tp_comm": "2 all-reduces per layer (Megatron-LM), NCCL LL or Simple protocol, "
                   "whichever is faster" if tp > 1 else None,
        "execution": {"graph": "CUDA graph replay (fused engine): "
                               f"{GRAPH_KERNEL_GAP_S * 1e6:g} µs GPU gap per kernel",
                      "eager-gpu": "eager PyTorch: host dispatch per op overlaps the GPU",
                      "eager-cpu": "eager PyTorch on a CPU: dispatch per op adds"}[execution],
        "kernels_per_layer": kernels,
        "matmuls_per_step": matmuls_per_step(m, cfg.fused),
        "prefill_logits": "every prompt position (Hugging Face's default logits_to_keep=0)"
        if cfg.logits_all_positions else "the last position of each prompt",
        "kernel_overhead_s": eff.kernel_overhead_s if execution != "graph"
        else GRAPH_KERNEL_GAP_S,
        "paged_kv_slowdown": PAGED_KV_SLOWDOWN if cfg.attention == "paged" else None,
        "efficiency": eff.source,
    }
    return StepModel(
        device=device, eff=eff, cfg=cfg, dense_weight_bytes=dense, expert_bytes=expert,
        moe_layers=m.num_moe_layers if m.is_moe else 0, experts=m.num_experts,
        top_k=m.experts_per_token, flops_per_token=body, head_flops_per_logit=head,
        attn_flops_per_pair=pair * full_layers / tp, kv_bytes_per_token=kv,
        act_bytes_per_token=act, compute_dtype=compute_dtype,
        dequant_ops_per_weight_byte=dequant, matmuls_per_step=matmuls_per_step(m, cfg.fused),
        layers=m.num_layers, allreduce_s=ar, kernels_per_layer=kernels,
        kv_read_factor=kv_factor, allreduce_ll_s=ar_ll, execution=execution,
        matmul_only_factor=fp4_factor,
        assumptions={k: v for k, v in assumptions.items() if v is not None})


def matmuls_per_step(m: ModelSpec, fused: bool) -> int:
    """Weight matmuls of one iteration: an engine's 4 per layer (fused QKV, out, fused gate/up,
    down) plus the head; eager PyTorch runs the checkpoint's own layout (separate q/k/v and
    gate/up where the model has them, as Hugging Face's Linear modules), which sets the size
    of each matmul on the measured size curve."""
    if fused or m.is_moe or m.is_mla:
        return 4 * m.num_layers + 1
    attn = 2 if m.fused_qkv else 4
    mlp = (2 if m.fused_gate_up else 3) if m.mlp == "gated" else 2
    return (attn + mlp) * m.num_layers + 1


def eager_kernels_per_layer(m: ModelSpec, act_dtype: str) -> float:
    """Kernel launches per layer of an unfused decode step, counted from the op builder."""
    from gpuplan.ops.decode import build_decode

    ops = build_decode(m, 1, 16, Impl(fused=False, dtype=act_dtype))
    return sum(o.kernels * o.count for o in ops) / m.num_layers


def _allreduce(device: Device, tp: int, bytes_per_token: float) -> tuple[float, float]:
    """(latency, s per token) of one layer's 2 all-reduces: affine fit of the ring model."""
    if tp <= 1:
        return 0.0, 0.0
    cluster = default_cluster(device, tp)
    big = 1 << 14
    t1 = collective_time("all_reduce", bytes_per_token, tp, cluster).time_s
    t2 = collective_time("all_reduce", bytes_per_token * big, tp, cluster).time_s
    slope = (t2 - t1) / (big - 1)
    return 2 * (t1 - slope), 2 * slope


def _allreduce_ll(device: Device, tp: int, bytes_per_token: float) -> tuple[float, float]:
    """(latency, s per token) of one layer's 2 all-reduces with NCCL's LL protocol inside one
    node: NCCL's cost model (NCCL_LL_* above), its ring steps counted by `comm.flat_time`."""
    if tp <= 1:
        return 0.0, 0.0
    up = default_cluster(device, tp).scale_up
    step = NCCL_LL_STEP_S["nvlink" if device.scale_up is not None else "pcie"]
    ll = up.model_copy(update={"latency_s": step, "efficiency": up.efficiency * NCCL_LL_BW_SHARE})
    lat = NCCL_LL_BASE_S + flat_time("all_reduce", 1e-30, tp, ll)
    slope = flat_time("all_reduce", bytes_per_token, tp, ll) - flat_time(
        "all_reduce", 1e-30, tp, ll)
    return 2 * lat, 2 * slope


def prefill_s(sm: StepModel, batch: int, prompt: int) -> float:
    """Prefill of `batch` prompts of `prompt` tokens in one pass (causal: p(p+1)/2 pairs each);
    the LM head for the last token of each, or for every token (cfg.logits_all_positions)."""
    logits = batch * prompt if sm.cfg.logits_all_positions else batch
    return sm.time_s(0, 0.0, batch * prompt, batch * prompt * (prompt + 1) / 2, logits)


def decode_s(sm: StepModel, batch: int, context: int) -> float:
    """One decode step of `batch` sequences each holding `context` cached tokens."""
    return sm.time_s(batch, float(batch * context))


@dataclass(frozen=True)
class Latency:
    """Latency of a batch served alone: prefill together, then decode together."""

    batch: int
    prompt_len: int
    output_len: int
    ttft_s: float
    tpot_s: float
    e2e_latency_s: float
    output_tokens_per_s: float
    """the whole TP group's output tokens per second for this batch"""
    prefill_s: float
    decode_first_step_s: float
    decode_last_step_s: float
    weight_read_floor_s: float
    """weight bytes / datasheet bandwidth: no decode step is faster"""
    compute_bound_batch: int | None
    decode_bound: str
    assumptions: dict[str, object]

    def to_json(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items()}


def latency(sm: StepModel, batch: int, prompt: int, output: int) -> Latency:
    """TTFT = prefill of the batch; TPOT = mean decode step as the cache grows from `prompt` to
    `prompt + output - 1` (step time is affine in the context, so the mean of the first and
    last steps is exact where no roofline term switches bound); e2e = TTFT + (O-1) x TPOT."""
    for f, v in (("batch", batch), ("prompt_len", prompt), ("output_len", output)):
        if not isinstance(v, int) or v < 1:
            raise InputError(f, v, "a whole number >= 1")
    pre = prefill_s(sm, batch, prompt)
    first = decode_s(sm, batch, prompt)
    last = decode_s(sm, batch, prompt + output - 1)
    mid = decode_s(sm, batch, prompt + (output - 1) // 2)
    tpot = (first + 4 * mid + last) / 6 if output > 1 else 0.0  # Simpson: exact if affine
    e2e = pre + (output - 1) * tpot
    comp, mem = sm.linear_s(batch, batch)
    return Latency(
        batch=batch, prompt_len=prompt, output_len=output, ttft_s=pre, tpot_s=tpot,
        e2e_latency_s=e2e, output_tokens_per_s=batch * output / e2e, prefill_s=pre,
        decode_first_step_s=first, decode_last_step_s=last,
        weight_read_floor_s=sm.weights_touched(batch) / (
            sm.eff.measured.get("memory") or sm.device.mem_bw_bytes_per_s),
        compute_bound_batch=compute_bound_batch(sm),
        decode_bound="compute" if comp >= mem else "memory", assumptions=sm.assumptions)


def compute_bound_batch(sm: StepModel, limit: int = 1 << 20) -> int | None:
    """Smallest decode batch whose linear layers take longer on compute than on reading the
    weights (the ridge of the decode roofline); None if not reached below `limit`."""
    def bound(b: int) -> bool:
        c, m = sm.linear_s(b, b)
        return c >= m

    below = largest_true(lambda b: not bound(b), limit)  # memory-bound batches: 1..below
    return None if below >= limit else below + 1
