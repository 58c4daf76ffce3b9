"""PyTorch-CPU peer of `trainer bench --net resnet34|resnet50`: time one SGD-momentum train step of a
torchvision ResNet (1000 classes, float32, random data) at a given batch and resolution, on every core.
Usage: torch_resnet_step.py NET BATCH SIZE [STEPS]"""
import os
import sys

import torch
import torchvision

from torch_step_timing import time_sgd_steps

name, batch, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
steps = int(sys.argv[4]) if len(sys.argv) > 4 else 10
torch.set_num_threads(os.cpu_count())
torch.manual_seed(0)
net = getattr(torchvision.models, name)(num_classes=1000)
net.train()
x = torch.randn(batch, 3, size, size)
y = torch.randint(0, 1000, (batch,))
times = time_sgd_steps(net, x, y, lr=0.01, steps=steps, warmup=2)
median = times[len(times) // 2]
print(f"pytorch {torch.__version__} {name} threads={torch.get_num_threads()} batch={batch} size={size}: "
      f"median {median * 1000:.1f} ms/step (min {times[0] * 1000:.1f}, max {times[-1] * 1000:.1f}), "
      f"{batch / median:.0f} images/s")
