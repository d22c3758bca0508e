"""A data loader whose dataset sleeps a known time per sample; the script measures its own
input wait (time inside next(loader)) and step time, one JSON line per step, into argv[1]."""

import json
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

SLEEP_S = float(sys.argv[2]) if len(sys.argv) > 2 else 0.004
WORKERS = int(sys.argv[3]) if len(sys.argv) > 3 else 0


class Slow(Dataset):
    def __len__(self):
        return 10_000

    def __getitem__(self, i):
        time.sleep(SLEEP_S)
        return torch.randn(256), torch.randn(16)


torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 16))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(Slow(), batch_size=8, num_workers=WORKERS)
log = open(sys.argv[1], "w")  # noqa: SIM115 - written step by step until the profiler stops
it = iter(loader)
t_prev = time.perf_counter()
for _ in range(1000):
    t0 = time.perf_counter()
    x, y = next(it)
    wait = time.perf_counter() - t0
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    now = time.perf_counter()
    log.write(json.dumps({"wait_s": wait, "step_s": now - t_prev}) + "\n")
    log.flush()
    t_prev = now
