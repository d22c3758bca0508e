"""CUDA: every step copies a large batch from pageable host memory, blocking (no pin_memory,
no non_blocking); the model itself is small. Optional argument: the device (default cuda; on
the CPU nothing is copied)."""

import sys

import torch

dev = sys.argv[1] if len(sys.argv) > 1 else "cuda"
torch.manual_seed(0)
model = torch.nn.Linear(1024, 1024).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
host = torch.randn(16384, 1024)  # 64 MiB, pageable
for _ in range(1000):
    x = host.to(dev)
    loss = model(x[:256]).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
