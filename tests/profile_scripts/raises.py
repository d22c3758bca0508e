import torch

model = torch.nn.Linear(4, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(10):
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    if step == 3:
        raise ValueError("boom in the user's script")
