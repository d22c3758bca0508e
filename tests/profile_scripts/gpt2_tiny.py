"""A small GPT-2-style model from `transformers`, built from a config (random weights),
trained on random tokens with AdamW. Optional argument: the device (default cpu)."""

import sys

import torch
from transformers import GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
cfg = GPT2Config(n_layer=2, n_embd=128, n_head=4, n_positions=128, vocab_size=2048,
                 bos_token_id=0, eos_token_id=0)
dev = sys.argv[1] if len(sys.argv) > 1 else "cpu"
model = GPT2LMHeadModel(cfg).to(dev)
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for _ in range(1000):
    ids = torch.randint(0, cfg.vocab_size, (4, 64), device=dev)
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad()
