#!/usr/bin/env python3
"""Writes graphs/testdata/torchvision_init_stats.json: the per-tensor statistics of the initial weights
torchvision 0.14 gives the seed nets it has (resnet34, resnet50, mobilenet_v2, efficientnet_b0,
convnext_tiny), i.e. each model's own __init__ (kaiming/trunc-normal/uniform/constant per layer), for
TestInitMatchesTorchvision in graphs/. For every floating state_dict entry: its element count, mean,
population standard deviation and largest absolute value, all in float64, over the values within 20
standard deviations of the mean; "far" counts the ones left out. Those are torch's, not the
distribution's: torch 1.13's trunc_normal_ maps a uniform draw through float32 erfinv, which now and then
returns ±inf, clamped to the truncation bound (±2 for ConvNeXt's σ = 0.02, a 100σ value).

ViT-Tiny and MobileNetV4-Conv-M are timm nets; timm is not installed on these machines, so they have no
fixture here.

Run: /usr/bin/python3 scripts/torchvision_init_stats.py   (Debian's python3-torchvision 0.14)"""
import json
import os

import torch
import torchvision
from torchvision import models

NETS = ["resnet34", "resnet50", "mobilenet_v2", "efficientnet_b0", "convnext_tiny"]

out = {"torch": torch.__version__, "torchvision": torchvision.__version__, "nets": {}}
for i, name in enumerate(NETS):
    torch.manual_seed(1000 + i)
    model = getattr(models, name)(weights=None)
    stats = {}
    for key, t in model.state_dict().items():
        if not t.is_floating_point():
            continue  # num_batches_tracked
        v = t.detach().double().flatten()
        n = v.numel()
        kept = v[(v - v.mean()).abs() <= 20 * v.std(unbiased=False)] if n > 1 else v
        stats[key] = {"n": n, "far": n - kept.numel(), "mean": kept.mean().item(),
                      "std": kept.std(unbiased=False).item(), "max_abs": kept.abs().max().item()}
    out["nets"][name] = stats
    print(name, len(stats), "tensors")

path = os.path.join(os.path.dirname(__file__), "..", "graphs", "testdata", "torchvision_init_stats.json")
with open(path, "w") as f:
    json.dump(out, f, indent=0, sort_keys=True)
print("wrote", os.path.normpath(path))
