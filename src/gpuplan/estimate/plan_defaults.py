"""The stated defaults of `gpuplan plan` (kept import-free: the CLI reads them at start-up)."""

CHAT_PROMPT = 512
CHAT_OUTPUT = 256
"""A chat turn: 512 prompt and 256 output tokens (`gpuplan serve`'s defaults; ShareGPT-style
conversations average a few hundred tokens each way, vLLM paper §6.1 Fig. 11)."""
CHAT_RATE = 2.0
"""Requests per second of the default load (assumption: ~170,000 chats a day)."""
CHAT_REQUESTS = 500
"""Simulated requests (Poisson arrivals, seed 0): p99 is the 5th-largest of 500."""
SLO_TTFT_S = 2.0
SLO_TPOT_S = 0.2
"""MLPerf Inference v4.0 Llama-2-70B server-scenario limits: TTFT 2 s, TPOT 200 ms (p99)."""
DEFAULT_GPU = "h100"
"""Device when --gpu is absent: the default of `gpuplan train` and `gpuplan serve`."""
DEFAULT_GPUS = 8
"""Training GPUs when --gpus is absent: one HGX/DGX node, `gpuplan train`'s default."""
