"""PyTorch-CPU peer: time one SGD train step of the MNIST-CNN (conv3x3 32, conv3x3 64, max-pool 2,
dense 128, dense 10; float32, NHWC-equivalent sizes) at a given batch, using every core."""
import os
import sys

import torch
from torch import nn

from torch_step_timing import time_sgd_steps

batch = int(sys.argv[1]) if len(sys.argv) > 1 else 128
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
torch.set_num_threads(os.cpu_count())
torch.manual_seed(0)
net = nn.Sequential(
    nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(9216, 128), nn.ReLU(), nn.Linear(128, 10))
x = torch.randn(batch, 1, 28, 28)
y = torch.randint(0, 10, (batch,))
times = time_sgd_steps(net, x, y, lr=0.05, steps=steps, warmup=3)
median = times[len(times) // 2]
print(f"pytorch {torch.__version__} threads={torch.get_num_threads()} batch={batch}: "
      f"median {median * 1000:.1f} ms/step, {batch / median:.0f} images/s")
