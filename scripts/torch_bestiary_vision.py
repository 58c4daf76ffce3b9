#!/usr/bin/python3
"""Writes the PyTorch fixtures of the bestiary's vision blocks (bestiary/checks/vision_torch_test.go):

    scripts/torch_bestiary_vision.py     # rewrites bestiary/checks/testdata/vision/*.pth (seeded)

Each file is torch.save of one torchvision 0.14 module's state_dict in float64, its parameters and
BatchNorm running statistics drawn away from their initial values (so no γ = 1, β = 0 hides an error),
plus three extra entries the Go test reads and the import ignores: "input" (NHWC), and the module's
output on it in eval mode ("output_eval", running statistics) and in training mode ("output_train",
batch statistics), both NHWC:

    dense_block.pth        torchvision.models.densenet._DenseBlock(3 layers, 5 in, bn_size 4, growth 4)
    transition_layer.pth   densenet._Transition(6, 4) on an odd 7×5 map
    inception_module.pth   googlenet.Inception(6, 4, 3, 5, 2, 3, 2)
    shufflev2_block.pth    nn.Sequential of shufflenetv2.InvertedResidual(8, 16, 2) and two (16, 16, 1), a 7×7 map
    swin_stage.pth         nn.Sequential of swin_transformer.SwinTransformerBlock(8, 2, [3, 3], shift 0 then 1,
                           mlp_ratio 4) on a 5×7 map (padded to 6×9 windows)

Runs under Debian's /usr/bin/python3 (torch 1.13, torchvision 0.14).
"""

import os
from collections import OrderedDict

import torch
import torch.nn as nn
from torchvision.models.densenet import _DenseBlock, _Transition
from torchvision.models.googlenet import Inception
from torchvision.models.shufflenetv2 import InvertedResidual
from torchvision.models.swin_transformer import SwinTransformerBlock

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bestiary", "checks", "testdata", "vision")


def randomize(module, g):
    """Draws every parameter and BatchNorm statistic: weights N(0, 0.5²) (norms' γ and running_var
    U(0.5, 1.5)), biases and running means N(0, 0.3²)."""
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, (nn.BatchNorm2d, nn.LayerNorm)):
                m.weight.copy_(0.5 + torch.rand(m.weight.shape, generator=g, dtype=torch.float64))
                m.bias.copy_(0.3 * torch.randn(m.bias.shape, generator=g, dtype=torch.float64))
                if isinstance(m, nn.BatchNorm2d):
                    m.running_mean.copy_(0.3 * torch.randn(m.running_mean.shape, generator=g, dtype=torch.float64))
                    m.running_var.copy_(0.5 + torch.rand(m.running_var.shape, generator=g, dtype=torch.float64))
            else:
                for name, p in m.named_parameters(recurse=False):
                    std = 0.3 if name == "bias" else 0.5
                    p.copy_(std * torch.randn(p.shape, generator=g, dtype=torch.float64))


def write(name, module, x_nchw=None, x_nhwc=None, nchw=True):
    g = torch.Generator().manual_seed(sum(map(ord, name)))
    module = module.double()
    randomize(module, g)
    shape = x_nchw if nchw else x_nhwc
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    to_nhwc = (lambda t: t.permute(0, 2, 3, 1).contiguous()) if nchw else (lambda t: t.contiguous())
    state = OrderedDict((k, v.clone()) for k, v in module.state_dict().items())
    with torch.no_grad():
        out_eval = module.eval()(x)
        out_train = module.train()(x)  # updates the running statistics, which were saved before
    state["input"] = to_nhwc(x)
    state["output_eval"] = to_nhwc(out_eval)
    state["output_train"] = to_nhwc(out_train)
    os.makedirs(OUT, exist_ok=True)
    torch.save(state, os.path.join(OUT, name + ".pth"))
    print(name, tuple(state["input"].shape), "->", tuple(state["output_eval"].shape))


def main():
    write("dense_block", _DenseBlock(num_layers=3, num_input_features=5, bn_size=4, growth_rate=4, drop_rate=0),
          x_nchw=(2, 5, 6, 6))
    write("transition_layer", _Transition(6, 4), x_nchw=(2, 6, 7, 5))
    write("inception_module", Inception(6, 4, 3, 5, 2, 3, 2), x_nchw=(2, 6, 5, 5))
    write("shufflev2_block", nn.Sequential(InvertedResidual(8, 16, 2), InvertedResidual(16, 16, 1), InvertedResidual(16, 16, 1)),
          x_nchw=(2, 8, 7, 7))
    swin = nn.Sequential(*[SwinTransformerBlock(8, 2, [3, 3], [0, 0] if i % 2 == 0 else [1, 1], mlp_ratio=4.0) for i in range(2)])
    write("swin_stage", swin, x_nhwc=(2, 5, 7, 8), nchw=False)


if __name__ == "__main__":
    main()
