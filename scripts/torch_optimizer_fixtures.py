#!/usr/bin/env python3
"""Writes trainstep/testdata/torch_optimizers.json: PyTorch's SGD (momentum, Nesterov) and AdamW on small
float64 tensors over five steps, with a changing learning rate, a zero gradient and a no-decay group, for
trainer's TestOptimizersMatchPyTorch. Run from the repository root with Debian's python3-torch (/usr/bin/python3):

    /usr/bin/python3 scripts/torch_optimizer_fixtures.py
"""
import json

import torch

torch.manual_seed(7)
SHAPES = {"weight": (2, 3), "bias": (3,)}
LRS = [0.0625, 0.125, 0.125, 0.03125, 0.5]
CASES = {
    "sgd_momentum": (torch.optim.SGD, dict(momentum=0.9, weight_decay=0.01)),
    "sgd_nesterov": (torch.optim.SGD, dict(momentum=0.9, nesterov=True, weight_decay=0.01)),
    "adamw": (torch.optim.AdamW, dict(betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05)),
}

init = {k: torch.randn(*s, dtype=torch.float64) for k, s in SHAPES.items()}
grads = [{k: (torch.zeros(*s, dtype=torch.float64) if step == 2 else torch.randn(*s, dtype=torch.float64))
          for k, s in SHAPES.items()} for step in range(len(LRS))]

out = {"lrs": LRS, "init": {k: v.flatten().tolist() for k, v in init.items()},
       "grads": [{k: v.flatten().tolist() for k, v in g.items()} for g in grads], "cases": {}}
for name, (cls, kw) in CASES.items():
    params = {k: torch.nn.Parameter(v.clone()) for k, v in init.items()}
    # The bias is the no-decay group, as the trainer's decay mask puts it.
    opt = cls([{"params": [params["weight"]]}, {"params": [params["bias"]], "weight_decay": 0.0}], lr=LRS[0], **kw)
    steps = []
    for step, lr in enumerate(LRS):
        for group in opt.param_groups:
            group["lr"] = lr
        for k, p in params.items():
            p.grad = grads[step][k].clone()
        opt.step()
        steps.append({k: p.detach().flatten().tolist() for k, p in params.items()})
    out["cases"][name] = steps

with open("trainstep/testdata/torch_optimizers.json", "w") as f:
    json.dump(out, f, indent=1)
print("wrote trainstep/testdata/torch_optimizers.json with", ", ".join(CASES))
