"""Exactly one host read per step: loss.item() on line 19 (no other problem injected); on the
GPU when there is one."""

import torch

dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.Linear(1024, 512)).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(128, 512, device=dev)
y = torch.randn(128, 512, device=dev)
total = 0.0
for _ in range(1000):
    out = model(x)
    loss = torch.nn.functional.mse_loss(out, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    total += loss.item()
