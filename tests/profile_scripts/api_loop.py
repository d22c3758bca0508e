"""The Python API around a user's own loop (run in-process by the tests)."""

import torch

import gpuplan


def main(steps: int = 4, warmup: int = 1) -> dict:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(), torch.nn.Linear(64, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 64), torch.randn(32, 8)
    with gpuplan.profile(steps=steps, warmup=warmup) as prof:
        for _ in range(warmup + steps + 2):
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            print(f"{loss:.3f}")
            prof.step()
    return prof.result
