"""An fp32 model dominated by many unfused element-wise ops on large activations."""

import torch


class Chain(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(64, 64)

    def forward(self, x):
        h = self.proj(x)
        for _ in range(6):
            h = h * 1.01 + 0.1
            h = torch.tanh(h) * torch.sigmoid(h)
            h = h - h.mean(dim=-1, keepdim=True)
        return h


torch.manual_seed(0)
model = Chain()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(4096, 64)
for _ in range(1000):
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
