"""PyTorch-CPU peer: time one SGD train step of the MNIST-CNN (conv3x3 32, conv3x3 64, max-pool 2,
dense 128, dense 10; float32, NHWC-equivalent sizes) at a given batch, using every core."""
import os
import sys
import time

import torch
from torch import nn

batch = int(sys.argv[1]) if len(sys.argv) > 1 else 128
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
torch.set_num_threads(os.cpu_count())
torch.manual_seed(0)
net = nn.Sequential(
    nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(9216, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
x = torch.randn(batch, 1, 28, 28)
y = torch.randint(0, 10, (batch,))
loss_fn = nn.CrossEntropyLoss()


def step():
    opt.zero_grad()
    loss = loss_fn(net(x), y)
    loss.backward()
    opt.step()


for _ in range(3):
    step()
times = []
for _ in range(steps):
    t0 = time.perf_counter()
    step()
    times.append(time.perf_counter() - t0)
times.sort()
median = times[len(times) // 2]
print(f"pytorch {torch.__version__} threads={torch.get_num_threads()} batch={batch}: "
      f"median {median * 1000:.1f} ms/step, {batch / median:.0f} images/s")
