#!/usr/bin/env python3
"""Writes bestiary/testdata/dense_torch.json for TestBestiaryDenseMatchesTorch: the bestiary's
dense-group layers in PyTorch 1.13 / torchvision 0.14, float64, every parameter and BatchNorm statistic
random, one input each and their outputs in evaluation mode and, where the layer has BatchNorm or
dropout, in training mode (batch statistics, dropout set to 0).

- asppModule: torchvision's models.segmentation.deeplabv3.ASPP (rates 6/12/18);
- fpnModule: torchvision's ops.FeaturePyramidNetwork on odd sizes (9, 5, 3, 2);
- positionalEncoding, unetDown, unetUp, nerfMLP, waveNetBlock, mobileVitBlock: no package here has
  them (timm is not installed), so they are written below from their definitions with PyTorch's
  modules (nn.MaxPool2d, nn.Upsample(bilinear, align_corners=True), nn.Conv1d with dilation,
  nn.MultiheadAttention, nn.LayerNorm), under the attribute names of milesial's U-Net, nerf-pytorch and
  timm's MobileVitBlock (nn.MultiheadAttention's in_proj/out_proj renamed to timm's qkv/proj).

Tensors are flat lists in PyTorch's layouts (NCHW images, NCT sequences, OIHW / OIK kernels, [out, in]
linear weights). Run from the repository root with Debian's python3-torch:

    /usr/bin/python3 scripts/torch_bestiary_dense.py
"""
import json
from collections import OrderedDict

import torch
import torch.nn.functional as F
from torch import nn
from torchvision.models.segmentation.deeplabv3 import ASPP
from torchvision.ops import FeaturePyramidNetwork

torch.manual_seed(20)
torch.set_default_dtype(torch.float64)


class DoubleConv(nn.Module):
    def __init__(self, ic, oc, mid):
        super().__init__()
        self.double_conv = nn.Sequential(
            nn.Conv2d(ic, mid, 3, padding=1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(),
            nn.Conv2d(mid, oc, 3, padding=1, bias=False), nn.BatchNorm2d(oc), nn.ReLU())

    def forward(self, x):
        return self.double_conv(x)


class Down(nn.Module):
    def __init__(self, ic, oc):
        super().__init__()
        self.maxpool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(ic, oc, oc))

    def forward(self, x):
        return self.maxpool_conv(x)


class Up(nn.Module):
    def __init__(self, ic, oc):
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
        self.conv = DoubleConv(ic, oc, ic // 2)

    def forward(self, x, skip):
        return self.conv(torch.cat([skip, self.up(x)], dim=1))


class NeRF(nn.Module):
    def __init__(self, pos, dirs, w):
        super().__init__()
        self.pos = pos
        self.pts_linears = nn.ModuleList(
            [nn.Linear(pos, w)] + [nn.Linear(w + pos if i == 5 else w, w) for i in range(1, 8)])
        self.alpha_linear = nn.Linear(w, 1)
        self.feature_linear = nn.Linear(w, w)
        self.views_linears = nn.ModuleList([nn.Linear(w + dirs, w // 2)])
        self.rgb_linear = nn.Linear(w // 2, 3)

    def forward(self, x):
        pts, views = x[..., :self.pos], x[..., self.pos:]
        h = pts
        for i, layer in enumerate(self.pts_linears):
            h = F.relu(layer(h))
            if i == 4:
                h = torch.cat([pts, h], -1)
        sigma = self.alpha_linear(h)
        h = F.relu(self.views_linears[0](torch.cat([self.feature_linear(h), views], -1)))
        return torch.cat([torch.sigmoid(self.rgb_linear(h)), sigma], -1)


class WaveNetLayer(nn.Module):
    def __init__(self, r, s, d, last):
        super().__init__()
        self.d = d
        self.filter = nn.Conv1d(r, r, 2, dilation=d)
        self.gate = nn.Conv1d(r, r, 2, dilation=d)
        self.skip = nn.Conv1d(r, s, 1)
        self.residual = None if last else nn.Conv1d(r, r, 1)


class WaveNet(nn.Module):
    def __init__(self, r, s, n):
        super().__init__()
        self.layers = nn.ModuleList([WaveNetLayer(r, s, 2 ** i, i == n - 1) for i in range(n)])

    def forward(self, x):  # [N, C, T]
        skips = 0
        for layer in self.layers:
            xp = F.pad(x, (layer.d, 0))  # causal: only the past
            z = torch.tanh(layer.filter(xp)) * torch.sigmoid(layer.gate(xp))
            skips = skips + layer.skip(z)
            if layer.residual is not None:
                x = x + layer.residual(z)
        return skips


class PositionalEncoding(nn.Module):
    def __init__(self, frequencies):
        super().__init__()
        self.frequencies = frequencies

    def forward(self, x):
        parts = [x]
        for k in range(self.frequencies):
            parts += [torch.sin(2.0 ** k * torch.pi * x), torch.cos(2.0 ** k * torch.pi * x)]
        return torch.cat(parts, -1)


class ConvNormAct(nn.Module):
    def __init__(self, ic, oc, k):
        super().__init__()
        self.conv = nn.Conv2d(ic, oc, k, padding=k // 2, bias=False)
        self.bn = nn.BatchNorm2d(oc)

    def forward(self, x):
        return F.silu(self.bn(self.conv(x)))


class TransformerLayer(nn.Module):
    def __init__(self, d, heads, m):
        super().__init__()
        self.norm1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(OrderedDict(fc1=nn.Linear(d, m), act=nn.SiLU(), fc2=nn.Linear(m, d)))

    def forward(self, x):
        y = self.norm1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class MobileViT(nn.Module):
    """timm's MobileVitBlock (patch 2), its unfold and fold in NCHW as timm writes them."""

    def __init__(self, ic, d, heads, m, n):
        super().__init__()
        self.conv_kxk = ConvNormAct(ic, ic, 3)
        self.conv_1x1 = nn.Conv2d(ic, d, 1, bias=False)
        self.transformer = nn.Sequential(*[TransformerLayer(d, heads, m) for _ in range(n)])
        self.norm = nn.LayerNorm(d)
        self.conv_proj = ConvNormAct(d, ic, 1)
        self.conv_fusion = ConvNormAct(2 * ic, ic, 3)

    def forward(self, x):
        shortcut = x
        x = self.conv_1x1(self.conv_kxk(x))
        b, c, h, w = x.shape
        nh, nw = h // 2, w // 2
        x = x.reshape(b * c * nh, 2, nw, 2).transpose(1, 2)
        x = x.reshape(b, c, nh * nw, 4).transpose(1, 3).reshape(b * 4, nh * nw, c)
        x = self.norm(self.transformer(x))
        x = x.contiguous().view(b, 4, nh * nw, c).transpose(1, 3).reshape(b * c * nh, nw, 2, 2)
        x = x.transpose(1, 2).reshape(b, c, h, w)
        return self.conv_fusion(torch.cat([shortcut, self.conv_proj(x)], 1))


TIMM_NAMES = {"attn.in_proj_weight": "attn.qkv.weight", "attn.in_proj_bias": "attn.qkv.bias",
              "attn.out_proj.weight": "attn.proj.weight", "attn.out_proj.bias": "attn.proj.bias"}


def timm_name(key):
    for a, b in TIMM_NAMES.items():
        key = key.replace(a, b)
    return key


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


def case(module, inputs, train=True, outputs=lambda y: [y]):
    randomise(module)
    state = {timm_name(k): flat(v) for k, v in module.state_dict().items() if not k.endswith("num_batches_tracked")}
    out = {"state": state, "inputs": [flat(x) for x in inputs]}
    module.eval()
    with torch.no_grad():
        out["eval"] = [flat(y) for y in outputs(module(*inputs))]
    if train:
        module.train()
        for m in module.modules():
            if isinstance(m, nn.Dropout):
                m.p = 0.0
        with torch.no_grad():
            out["train"] = [flat(y) for y in outputs(module(*inputs))]
    return out


class FPN(nn.Module):
    """ops.FeaturePyramidNetwork over positional inputs (its forward takes an OrderedDict)."""

    def __init__(self):
        super().__init__()
        self.fpn = FeaturePyramidNetwork([2, 3, 4, 5], 3)

    def forward(self, *levels):
        return list(self.fpn(OrderedDict((f"c{i + 2}", x) for i, x in enumerate(levels))).values())


cases = {
    "asppModule": case(ASPP(3, [6, 12, 18], 4), [torch.randn(2, 3, 20, 20)]),
    "fpnModule": case(FPN(), [torch.randn(2, c, s, s) for c, s in zip([2, 3, 4, 5], [9, 5, 3, 2])], train=False,
                      outputs=lambda ys: ys),
    "unetDown": case(Down(3, 4), [torch.randn(2, 3, 9, 8)]),
    "unetUp": case(Up(6, 4), [torch.randn(2, 3, 4, 5), torch.randn(2, 3, 8, 10)]),
    "nerfMLP": case(NeRF(9, 6, 8), [torch.randn(7, 15)], train=False),
    "waveNetBlock": case(WaveNet(3, 4, 4), [torch.randn(2, 3, 11)], train=False),
    "positionalEncoding": case(PositionalEncoding(4), [torch.rand(5, 3) * 2 - 1], train=False),
    "mobileVitBlock": case(MobileViT(3, 8, 2, 16, 2), [torch.randn(2, 3, 4, 6)]),
}
with open("bestiary/testdata/dense_torch.json", "w") as f:
    json.dump(cases, f)
