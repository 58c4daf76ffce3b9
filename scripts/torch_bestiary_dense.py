#!/usr/bin/env python3
"""Writes graphs/testdata/bestiary_dense_torch.json: torchvision 0.14's DeepLabV3 ASPP and
ops.FeaturePyramidNetwork in float64 with random weights (BatchNorm affine parameters and running
statistics too, FPN's biases too), one input each, and their outputs, for TestBestiaryDenseMatchesTorch.
ASPP's output is given in evaluation mode and in training mode with its dropout set to 0 (batch
statistics). Tensors are flat lists in PyTorch's layouts (NCHW, OIHW). Run from the repository root
with Debian's python3-torch:

    /usr/bin/python3 scripts/torch_bestiary_dense.py
"""
import json
from collections import OrderedDict

import torch
from torchvision.models.segmentation.deeplabv3 import ASPP
from torchvision.ops import FeaturePyramidNetwork

torch.manual_seed(20)
torch.set_default_dtype(torch.float64)


def randomise(module):
    """Random values for every parameter and BatchNorm statistic, so none is at its initial value."""
    with torch.no_grad():
        for name, t in module.state_dict().items():
            if name.endswith("num_batches_tracked"):
                continue
            if name.endswith("running_var") or (name.endswith(".weight") and t.dim() == 1):
                t.copy_(0.5 + torch.rand_like(t))
            else:
                t.copy_(0.4 * torch.randn_like(t))


def flat(t):
    return {"shape": list(t.shape), "data": t.flatten().tolist()}


def state(module):
    return {k: flat(v) for k, v in module.state_dict().items() if not k.endswith("num_batches_tracked")}


aspp = ASPP(3, [6, 12, 18], 4)
randomise(aspp)
aspp_state = state(aspp)  # before the training pass updates the running statistics
x = torch.randn(2, 3, 20, 20)
aspp.eval()
with torch.no_grad():
    aspp_eval = aspp(x)
aspp.train()
aspp.project[3].p = 0.0
with torch.no_grad():
    aspp_train = aspp(x)

fpn = FeaturePyramidNetwork([2, 3, 4, 5], 3)
randomise(fpn)
levels = OrderedDict((f"c{i + 2}", torch.randn(2, c, s, s)) for i, (c, s) in enumerate(zip([2, 3, 4, 5], [9, 5, 3, 2])))
with torch.no_grad():
    fpn_out = fpn(levels)

out = {
    "aspp": {"state": aspp_state, "x": flat(x), "eval": flat(aspp_eval), "train": flat(aspp_train)},
    "fpn": {"state": state(fpn), "levels": [flat(v) for v in levels.values()],
            "outputs": [flat(v) for v in fpn_out.values()]},
}
with open("graphs/testdata/bestiary_dense_torch.json", "w") as f:
    json.dump(out, f)
