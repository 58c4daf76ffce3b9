"""Times SGD-momentum train steps of a PyTorch net for the CPU peer scripts (torch_*_step.py)."""
import time

import torch


def time_sgd_steps(net, x, y, lr, steps, warmup):
    """Runs warmup untimed steps, then returns the sorted wall times of steps more, in seconds."""
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        loss_fn(net(x), y).backward()
        opt.step()

    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return sorted(times)
