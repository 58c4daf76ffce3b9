"""PyTorch-CPU peer of `trainer bench --net resnet34|resnet50`: time one SGD-momentum train step of a
torchvision ResNet (1000 classes, float32, random data) at a given batch and resolution, on every core.
Usage: torch_resnet_step.py NET BATCH SIZE [STEPS]"""
import os
import sys
import time

import torch
import torchvision

name, batch, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
steps = int(sys.argv[4]) if len(sys.argv) > 4 else 10
torch.set_num_threads(os.cpu_count())
torch.manual_seed(0)
net = getattr(torchvision.models, name)(num_classes=1000)
net.train()
opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
x = torch.randn(batch, 3, size, size)
y = torch.randint(0, 1000, (batch,))
loss_fn = torch.nn.CrossEntropyLoss()


def step():
    opt.zero_grad()
    loss = loss_fn(net(x), y)
    loss.backward()
    opt.step()


for _ in range(2):
    step()
times = []
for _ in range(steps):
    t0 = time.perf_counter()
    step()
    times.append(time.perf_counter() - t0)
times.sort()
median = times[len(times) // 2]
print(f"pytorch {torch.__version__} {name} threads={torch.get_num_threads()} batch={batch} size={size}: "
      f"median {median * 1000:.1f} ms/step (min {times[0] * 1000:.1f}, max {times[-1] * 1000:.1f}), "
      f"{batch / median:.0f} images/s")
