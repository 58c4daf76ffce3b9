#!/usr/bin/python3
"""Writes PyTorch reference fixtures for the weight-interchange comparison (docs/weights.md).

    scripts/torch_reference.py NET [--width W] [--size S] [--classes C] --out DIR
    scripts/torch_reference.py --check NET [same options] [--out DIR]
    scripts/torch_reference.py --eval DIR...

The first form builds the torchvision reference of NET (the small nets as nn.Modules with our module
names), seeds torch, randomises every BatchNorm's statistics and affine parameters and every
constant-initialised parameter (so that eval mode and each branch really count), and writes to DIR:

    weights.safetensors  the state_dict, in the net's reference names (timm's for ViT)
    io.safetensors       "input" [B, H, W, C] float32 (NHWC), "logits" [B, classes] float32 (eval mode),
                         "logits_f64" (the same model and input in float64)

with metadata net, width, size, classes, batch, and output ("logits", or "log_softmax" where the
reference's forward ends with it, as pytorch/examples' mnist Net does). The Go test TestTorchFixtures (weights/torch_test.go)
imports the weights into our net and compares its logits; --check runs it on the fresh fixture
(TRAINER_TORCH_FIXTURES=DIR go test ./weights -run TestTorchFixtures).

The third form is the other direction, used by TestExportLoadsInTorch: it loads weights our export
wrote into the reference with load_state_dict(strict=True) and writes torch's logits for our input.

Runs under Debian's /usr/bin/python3 (torch 1.13, torchvision 0.14); the safetensors format is written
with struct and json, as no safetensors module is installed.
"""

import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torchvision.models import convnext as tv_convnext
from torchvision.models import efficientnet as tv_efficientnet
from torchvision.models import resnet as tv_resnet

# Default (input size, channels, classes) of each net, as graphs/ registers them.
DEFAULTS = {
    "linear": (28, 1, 10),
    "mlp": (28, 1, 10),
    "mnist_cnn": (28, 1, 10),
    "mnist_fast": (28, 1, 10),
    "cifar_cnn": (32, 3, 10),
    "cifar8": (32, 3, 10),
    "cifar8_bn": (32, 3, 10),
    "resnet34": (224, 3, 1000),
    "resnet50": (224, 3, 1000),
    "mobilenet_v2": (224, 3, 1000),
    "efficientnet_b0": (224, 3, 1000),
    "convnext_tiny": (224, 3, 1000),
    "vit_tiny": (224, 3, 1000),
    "mobilenetv4_conv_medium": (224, 3, 1000),
    "shufflenet_v2_x1_0": (224, 3, 1000),
    "densenet121": (224, 3, 1000),
    "googlenet": (224, 3, 1000),
    "swin_t": (224, 3, 1000),
}


def scaled(units, width):
    """graphs.scaled: round half away from zero, at least 1."""
    if width == 0:
        width = 1
    return max(1, int(math.floor(units * width + 0.5)))


class MnistMLP(nn.Module):
    """graphs' linear (fc) and mlp (fc1, fc2, fc3 with ReLU); one channel, so NHWC and NCHW flatten alike."""

    def __init__(self, hidden, classes):
        super().__init__()
        self.names = ["fc"] if not hidden else ["fc%d" % (i + 1) for i in range(len(hidden) + 1)]
        sizes = [28 * 28] + hidden + [classes]
        for name, a, b in zip(self.names, sizes, sizes[1:]):
            setattr(self, name, nn.Linear(a, b))

    def forward(self, x):
        x = torch.flatten(x, 1)
        for i, name in enumerate(self.names):
            x = getattr(self, name)(x)
            if i < len(self.names) - 1:
                x = F.relu(x)
        return x


class MnistCNN(nn.Module):
    """pytorch/examples' mnist Net, module for module and op for op (its widths scaled): two dropouts
    (no weights; identity in eval), a channel-major flatten, and log_softmax on the output, so that the
    fixture holds what a PyTorch user's own Net computes from our weights (OUTPUTS marks the
    log-probabilities for the Go comparison)."""

    def __init__(self, width, classes):
        super().__init__()
        c1, c2, h = scaled(32, width), scaled(64, width), scaled(128, width)
        self.conv1 = nn.Conv2d(1, c1, 3, 1)
        self.conv2 = nn.Conv2d(c1, c2, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(12 * 12 * c2, h)
        self.fc2 = nn.Linear(h, classes)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = self.dropout1(F.max_pool2d(x, 2))
        x = torch.flatten(x, 1)
        x = self.dropout2(F.relu(self.fc1(x)))
        return F.log_softmax(self.fc2(x), dim=1)


# What a reference's forward returns when it is not the logits: the Go comparison applies the same
# function to our logits (metadata "output").
OUTPUTS = {"mnist_cnn": "log_softmax"}


class FeaturesClassifier(nn.Module):
    """features, a channel-major flatten, classifier: the module names graphs' mnist_fast declares."""

    def __init__(self, features, classifier):
        super().__init__()
        self.features = features
        self.classifier = classifier

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


class Cifar(nn.Module):
    """graphs/cifar.go's layout: features Sequential (conv3x3 pad 1 [+BN], ReLU, max-pool), then a
    channel-major flatten and classifier.{0,2} (cifar_cnn), or global average pooling and one Linear."""

    def __init__(self, widths, bn, hidden, classes):
        super().__init__()
        layers, c = [], 3
        for w in widths:
            if w == 0:
                layers.append(nn.MaxPool2d(2))
                continue
            layers.append(nn.Conv2d(c, w, 3, padding=1, bias=not bn))
            if bn:
                layers.append(nn.BatchNorm2d(w))
            layers.append(nn.ReLU())
            c = w
        self.features = nn.Sequential(*layers)
        self.flatten = hidden > 0
        if hidden:
            self.classifier = nn.Sequential(nn.Linear(c * 64, hidden), nn.ReLU(), nn.Linear(hidden, classes))
        else:
            self.classifier = nn.Linear(c, classes)

    def forward(self, x):
        x = self.features(x)
        x = torch.flatten(x, 1) if self.flatten else x.mean((2, 3))
        return self.classifier(x)


class ScaledResNet(nn.Module):
    """torchvision's ResNet with every width scaled (torchvision's own blocks; at width 1 use
    torchvision.models.resnetXX itself)."""

    def __init__(self, block, layers, width, classes):
        super().__init__()
        self.inplanes = scaled(64, width)
        self.conv1 = nn.Conv2d(3, self.inplanes, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        for i, (planes, n) in enumerate(zip([64, 128, 256, 512], layers)):
            setattr(self, "layer%d" % (i + 1), self._make_layer(block, scaled(planes, width), n, 1 if i == 0 else 2))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(self.inplanes, classes)

    def _make_layer(self, block, planes, n, stride):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(tv_resnet.conv1x1(self.inplanes, planes * block.expansion, stride),
                                       nn.BatchNorm2d(planes * block.expansion))
        blocks = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        blocks += [block(self.inplanes, planes) for _ in range(1, n)]
        return nn.Sequential(*blocks)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def make_divisible(v, divisor=8):
    """timm's and torchvision's channel rounding."""
    n = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return n + divisor if n < 0.9 * v else n


class ConvNormAct(nn.Module):
    """timm's ConvNormAct (modules conv, bn; ConvBnAct names its norm bn1): conv without bias, BatchNorm,
    ReLU; timm's default padding ((stride - 1) + (k - 1)) // 2."""

    def __init__(self, cin, cout, k, stride=1, groups=1, act=True, norm="bn"):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, stride, ((stride - 1) + (k - 1)) // 2, groups=groups, bias=False)
        self.norm, self.act = norm, act
        setattr(self, norm, nn.BatchNorm2d(cout))

    def forward(self, x):
        x = getattr(self, self.norm)(self.conv(x))
        return F.relu(x) if self.act else x


class UniversalInvertedResidual(nn.Module):
    """timm's UIR without layer scale or SE: dw_start, pw_exp, dw_mid, pw_proj, residual when shapes allow."""

    def __init__(self, cin, cout, start, mid, stride, exp):
        super().__init__()
        self.dw_start = ConvNormAct(cin, cin, start, 1 if mid else stride, cin, act=False) if start else nn.Identity()
        hidden = make_divisible(cin * exp)
        self.pw_exp = ConvNormAct(cin, hidden, 1)
        self.dw_mid = ConvNormAct(hidden, hidden, mid, stride, hidden) if mid else nn.Identity()
        self.pw_proj = ConvNormAct(hidden, cout, 1, act=False)
        self.skip = stride == 1 and cin == cout

    def forward(self, x):
        y = self.pw_proj(self.dw_mid(self.pw_exp(self.dw_start(x))))
        return x + y if self.skip else y


class EdgeResidual(nn.Module):
    """timm's EdgeResidual (fused IB): conv_exp k×k + bn1 + ReLU, conv_pwl 1×1 + bn2."""

    def __init__(self, cin, cout, k, stride, exp):
        super().__init__()
        hidden = make_divisible(cin * exp)
        self.conv_exp = nn.Conv2d(cin, hidden, k, stride, ((stride - 1) + (k - 1)) // 2, bias=False)
        self.bn1 = nn.BatchNorm2d(hidden)
        self.conv_pwl = nn.Conv2d(hidden, cout, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.skip = stride == 1 and cin == cout

    def forward(self, x):
        y = self.bn2(self.conv_pwl(F.relu(self.bn1(self.conv_exp(x)))))
        return x + y if self.skip else y


# timm's mobilenetv4_conv_medium arch_def (_gen_mobilenet_v4), one tuple per string:
# ("er", repeats, kernel, stride, expand, channels), ("uir", repeats, start, mid, stride, expand, channels),
# ("cn", repeats, kernel, stride, channels).
MNV4_CONV_MEDIUM = [
    [("er", 1, 3, 2, 4, 48)],
    [("uir", 1, 3, 5, 2, 4, 80), ("uir", 1, 3, 3, 1, 2, 80)],
    [("uir", 1, 3, 5, 2, 6, 160), ("uir", 2, 3, 3, 1, 4, 160), ("uir", 1, 3, 5, 1, 4, 160),
     ("uir", 1, 3, 3, 1, 4, 160), ("uir", 1, 3, 0, 1, 4, 160), ("uir", 1, 0, 0, 1, 2, 160),
     ("uir", 1, 3, 0, 1, 4, 160)],
    [("uir", 1, 5, 5, 2, 6, 256), ("uir", 1, 5, 5, 1, 4, 256), ("uir", 2, 3, 5, 1, 4, 256),
     ("uir", 1, 0, 0, 1, 4, 256), ("uir", 1, 3, 0, 1, 4, 256), ("uir", 1, 3, 5, 1, 2, 256),
     ("uir", 1, 5, 5, 1, 4, 256), ("uir", 2, 0, 0, 1, 4, 256), ("uir", 1, 5, 0, 1, 2, 256)],
    [("cn", 1, 1, 1, 960)],
]


class MobileNetV4(nn.Module):
    """timm's MobileNetV3 class as _gen_mobilenet_v4 configures it (timm is not installed here; written
    from timm's mobilenetv3.py and _efficientnet_blocks.py): conv_stem/bn1, blocks.s.j, pooling, then
    conv_head (no bias) + norm_head + ReLU, classifier. fix_stem below width 1; the head stays 1280."""

    def __init__(self, arch, width, classes):
        super().__init__()
        stem = 32 if width < 1 else make_divisible(32 * width)
        self.conv_stem = nn.Conv2d(3, stem, 3, 2, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(stem)
        cin, stages = stem, []
        for rows in arch:
            blocks = []
            for row in rows:
                kind, repeats, cout = row[0], row[1], make_divisible(row[-1] * width)
                for r in range(repeats):
                    if kind == "er":
                        blocks.append(EdgeResidual(cin, cout, row[2], row[3] if r == 0 else 1, row[4]))
                    elif kind == "uir":
                        blocks.append(UniversalInvertedResidual(cin, cout, row[2], row[3], row[4] if r == 0 else 1, row[5]))
                    else:
                        blocks.append(ConvNormAct(cin, cout, row[2], row[3] if r == 0 else 1, norm="bn1"))
                    cin = cout
            stages.append(nn.Sequential(*blocks))
        self.blocks = nn.Sequential(*stages)
        self.conv_head = nn.Conv2d(cin, 1280, 1, bias=False)
        self.norm_head = nn.BatchNorm2d(1280)
        self.classifier = nn.Linear(1280, classes)

    def forward(self, x):
        x = self.blocks(F.relu(self.bn1(self.conv_stem(x))))
        x = F.relu(self.norm_head(self.conv_head(x.mean((2, 3), keepdim=True))))
        return self.classifier(torch.flatten(x, 1))


def vit_shape(width):
    """graphs' vitConfig.widened: 64-wide heads, dim 64·heads, MLP 4·dim."""
    if width in (0, 1):
        return 3, 192, 768
    heads = max(1, int(math.floor(3 * width + 0.5)))
    return heads, 64 * heads, 4 * 64 * heads


def build(net, width, size, classes):
    if net == "linear":
        return MnistMLP([], classes)
    if net == "mlp":
        return MnistMLP([scaled(512, width), scaled(256, width)], classes)
    if net == "mnist_cnn":
        return MnistCNN(width, classes)
    if net == "mnist_fast":
        # graphs/small.go: conv3x3/2 16, conv3x3/2 32, conv3x3 64, each bias-free + BatchNorm + ReLU (28 -> 7 px).
        c = [scaled(16, width), scaled(32, width), scaled(64, width)]
        layers, cin = [], 1
        for cout, stride in zip(c, [2, 2, 1]):
            layers += [nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]
            cin = cout
        side = (size + 3) // 4
        return FeaturesClassifier(nn.Sequential(*layers), nn.Linear(cin * side * side, classes))
    if net == "cifar_cnn":
        return Cifar([scaled(32, width), scaled(32, width), 0, scaled(64, width), scaled(64, width), 0],
                     False, scaled(512, width), classes)
    if net in ("cifar8", "cifar8_bn"):
        vgg = [scaled(w, width) if w else 0 for w in [64, 64, 0, 128, 128, 0, 256, 256, 0, 512, 512, 0]]
        return Cifar(vgg, net == "cifar8_bn", 0, classes)
    if net in ("resnet34", "resnet50"):
        if width == 1:
            return getattr(torchvision.models, net)(num_classes=classes)
        block = tv_resnet.BasicBlock if net == "resnet34" else tv_resnet.Bottleneck
        return ScaledResNet(block, [3, 4, 6, 3], width, classes)
    if net == "mobilenet_v2":
        return torchvision.models.mobilenet_v2(width_mult=width, num_classes=classes)
    if net == "efficientnet_b0":
        setting, last = tv_efficientnet._efficientnet_conf("efficientnet_b0", width_mult=width, depth_mult=1.0)
        return tv_efficientnet.EfficientNet(setting, 0.2, num_classes=classes, last_channel=last)
    if net == "convnext_tiny":
        d = [scaled(c, width) for c in (96, 192, 384, 768)]
        cfg = tv_convnext.CNBlockConfig
        setting = [cfg(d[0], d[1], 3), cfg(d[1], d[2], 3), cfg(d[2], d[3], 9), cfg(d[3], None, 3)]
        return tv_convnext.ConvNeXt(setting, stochastic_depth_prob=0.1, num_classes=classes)
    if net == "mobilenetv4_conv_medium":
        return MobileNetV4(MNV4_CONV_MEDIUM, width, classes)
    if net == "vit_tiny":
        heads, dim, mlp = vit_shape(width)
        return torchvision.models.VisionTransformer(size, 16, 12, heads, dim, mlp, num_classes=classes)
    if net == "shufflenet_v2_x1_0":
        # graphs/shufflenet.go: every width scaled, the stages' to an even number.
        c = [24, 116, 232, 464, 1024]
        c = [2 * scaled(w // 2, width) if 1 <= i <= 3 else scaled(w, width) for i, w in enumerate(c)]
        return torchvision.models.ShuffleNetV2([4, 8, 4], c, num_classes=classes)
    if net == "densenet121":
        return torchvision.models.DenseNet(scaled(32, width), (6, 12, 24, 16), scaled(64, width), num_classes=classes)
    if net == "googlenet":
        return scaled_googlenet(width, classes)
    if net == "swin_t":
        # graphs/swin.go's widened: heads max(1, round(3·width)) doubling per stage, the embedding the
        # multiple of them nearest to 96·width (Python's round is half-even, Go's half away from zero).
        heads, embed = [3, 6, 12, 24], 96
        if width not in (0, 1):
            h0 = max(1, int(math.floor(3 * width + 0.5)))
            embed = h0 * max(1, int(math.floor(96 * width / h0 + 0.5)))
            heads = [h0 << i for i in range(4)]
        return torchvision.models.SwinTransformer([4, 4], embed, [2, 2, 6, 2], heads, [7, 7],
                                                  stochastic_depth_prob=0.2, num_classes=classes)
    raise SystemExit("unknown net %r; known: %s" % (net, ", ".join(sorted(DEFAULTS))))


def scaled_googlenet(width, classes):
    """torchvision's GoogLeNet without aux heads and without transform_input, every conv width scaled
    (graphs/googlenet.go); at widths where the scaled branches do not add up to the scaled inputs the
    concatenations would not match, which the assertion reports."""
    from torchvision.models.googlenet import BasicConv2d, GoogLeNet, Inception, InceptionAux
    s = lambda c: scaled(c, width)

    def conv(cin, cout, **kw):
        return BasicConv2d(cin if cin == 3 else s(cin), s(cout), **kw)

    out = [s(192)]  # the channels the previous layer produces

    def inception(cin, *chs, conv_block=None):
        assert s(cin) == out[0], "width %g: inputs %d scale to %d, the previous outputs are %d" % (
            width, cin, s(cin), out[0])
        out[0] = sum(s(c) for i, c in enumerate(chs) if i not in (1, 3))  # ch1x1, ch3x3, ch5x5, pool_proj
        return Inception(s(cin), *[s(c) for c in chs])

    m = GoogLeNet(num_classes=classes, aux_logits=False, transform_input=False, init_weights=True,
                               blocks=[conv, inception, InceptionAux])
    if width != 1:
        m.fc = nn.Linear(out[0], classes)
    return m


def timm_vit_names(sd):
    """Renames torchvision's VisionTransformer state_dict to timm's vit_tiny_patch16_224 keys."""
    out = {}
    for k, v in sd.items():
        k2 = k.replace("conv_proj.", "patch_embed.proj.").replace("heads.head.", "head.")
        k2 = {"class_token": "cls_token", "encoder.pos_embedding": "pos_embed",
              "encoder.ln.weight": "norm.weight", "encoder.ln.bias": "norm.bias"}.get(k2, k2)
        if k2.startswith("encoder.layers.encoder_layer_"):
            i, rest = k2[len("encoder.layers.encoder_layer_"):].split(".", 1)
            rest = {"ln_1.weight": "norm1.weight", "ln_1.bias": "norm1.bias",
                    "ln_2.weight": "norm2.weight", "ln_2.bias": "norm2.bias",
                    "self_attention.in_proj_weight": "attn.qkv.weight",
                    "self_attention.in_proj_bias": "attn.qkv.bias",
                    "self_attention.out_proj.weight": "attn.proj.weight",
                    "self_attention.out_proj.bias": "attn.proj.bias",
                    "mlp.0.weight": "mlp.fc1.weight", "mlp.0.bias": "mlp.fc1.bias",
                    "mlp.3.weight": "mlp.fc2.weight", "mlp.3.bias": "mlp.fc2.bias"}[rest]
            k2 = "blocks.%s.%s" % (i, rest)
        out[k2] = v
    return out


def randomise(model, gen):
    """Gives BatchNorm/LayerNorm statistics and affine parameters, and every constant-initialised
    parameter (zero biases, layer scales, class tokens, torchvision ViT's zero head), random values."""
    def normal(t, std, mean=0.0):
        t.copy_(torch.randn(t.shape, generator=gen) * std + mean)

    def uniform(t, lo, hi):
        t.copy_(torch.rand(t.shape, generator=gen) * (hi - lo) + lo)

    with torch.no_grad():
        done = set()
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                normal(m.running_mean, 0.1)
                uniform(m.running_var, 0.5, 1.5)
            if isinstance(m, (nn.modules.batchnorm._BatchNorm, nn.LayerNorm)) and m.weight is not None:
                uniform(m.weight, 0.5, 1.5)
                normal(m.bias, 0.1)
                done.update([id(m.weight), id(m.bias)])
        for name, p in model.named_parameters():
            if id(p) in done or p.numel() == 0:
                continue
            if name.endswith("layer_scale"):
                uniform(p, 0.1, 0.5)
            elif p.numel() == 1 or bool((p == p.flatten()[0]).all()):
                normal(p, 0.05)


def round_to(model, dtype):
    """Rounds every floating tensor of the model to dtype and back, so the stored weights are exact."""
    with torch.no_grad():
        for t in list(model.parameters()) + list(model.buffers()):
            if t.is_floating_point():
                t.copy_(t.to(dtype).to(t.dtype))


ST_DTYPES = {torch.float32: ("F32", "<f4"), torch.float64: ("F64", "<f8"), torch.float16: ("F16", "<f2"),
             torch.int64: ("I64", "<i8")}


def write_safetensors(path, tensors, metadata):
    """The safetensors format with struct and json: u64 header length, JSON header, raw data."""
    header, blobs, offset = {"__metadata__": {k: str(v) for k, v in metadata.items()}}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        code, np_dtype = ST_DTYPES[t.dtype]
        data = t.numpy().astype(np_dtype).tobytes()
        header[name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    js = json.dumps(header, separators=(",", ":")).encode()
    js += b" " * ((8 - len(js) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(js)))
        f.write(js)
        for b in blobs:
            f.write(b)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


NP_DTYPES = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "I64": "<i8", "I32": "<i4"}


def read_safetensors(path):
    """Returns ({name: tensor}, metadata) of a safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, e in header.items():
        b, e_ = e["data_offsets"]
        arr = np.frombuffer(data[8 + n + b:8 + n + e_], dtype=NP_DTYPES[e["dtype"]]).reshape(e["shape"])
        out[name] = torch.from_numpy(arr.copy())
    return out, meta


def eval_exported(d):
    """Loads DIR/weights.safetensors (written by our export) into the reference with strict=True, runs
    DIR/input.safetensors through it in eval mode, and writes DIR/torch.safetensors."""
    inputs, meta = read_safetensors(os.path.join(d, "input.safetensors"))
    net, width, size, classes = meta["net"], float(meta["width"]), int(meta["size"]), int(meta["classes"])
    model = build(net, width, size, classes)
    sd, _ = read_safetensors(os.path.join(d, "weights.safetensors"))
    if net == "vit_tiny":
        to_torchvision = timm_vit_names({k: k for k in model.state_dict()})  # timm key -> torchvision key
        sd = {to_torchvision.get(k, k): v for k, v in sd.items()}
    model.load_state_dict(sd, strict=True)
    model.eval()
    x = inputs["input"].permute(0, 3, 1, 2).contiguous()
    with torch.no_grad():
        logits = model(x)
        logits64 = model.double()(x.double())
    meta = dict(meta, output=OUTPUTS.get(net, "logits"))
    write_safetensors(os.path.join(d, "torch.safetensors"), {"logits": logits, "logits_f64": logits64}, meta)
    print("%s: loaded %d tensors with strict=True" % (d, len(sd)))


def make_fixture(args):
    size0, channels, classes0 = DEFAULTS[args.net]
    size = args.size or size0
    classes = args.classes or classes0
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    model = build(args.net, args.width, size, classes)
    randomise(model, gen)
    store = torch.float16 if args.dtype == "f16" else torch.float32
    if store != torch.float32:
        round_to(model, store)
    model.eval()
    x = torch.randn(args.batch, channels, size, size, generator=gen)
    with torch.no_grad():
        logits = model(x)
        logits64 = model.double()(x.double())
        model.float()
    sd = {k: v for k, v in model.state_dict().items()}
    if args.net == "vit_tiny":
        sd = timm_vit_names(sd)
    sd = {k: (v if k.endswith("num_batches_tracked") else v.to(store)) for k, v in sd.items()}
    os.makedirs(args.out, exist_ok=True)
    meta = {"net": args.net, "width": repr(float(args.width)), "size": size, "classes": classes,
            "batch": args.batch, "seed": args.seed, "torch": torch.__version__,
            "torchvision": torchvision.__version__, "format": "pt", "output": OUTPUTS.get(args.net, "logits")}
    write_safetensors(os.path.join(args.out, "weights.safetensors"), sd, meta)
    write_safetensors(os.path.join(args.out, "io.safetensors"), {
        "input": x.permute(0, 2, 3, 1).contiguous(), "logits": logits, "logits_f64": logits64}, meta)
    n = sum(v.numel() for k, v in sd.items() if not k.endswith("num_batches_tracked"))
    print("%s: width %g, %dx%d, %d classes, %d parameters+buffers -> %s (logits max |.| %.3g)" % (
        args.net, args.width, size, size, classes, n, args.out, logits.abs().max().item()))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("net", nargs="?", help="one of: " + ", ".join(sorted(DEFAULTS)))
    p.add_argument("--width", type=float, default=1.0, help="width multiplier (graphs.Options.Width)")
    p.add_argument("--size", type=int, default=0, help="input size (default: the net's)")
    p.add_argument("--classes", type=int, default=0, help="number of classes (default: the net's)")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", choices=["f32", "f16"], default="f32",
                   help="stored weight dtype (f16 halves committed fixtures; the model uses the rounded values)")
    p.add_argument("--out", help="output directory (required unless --check)")
    p.add_argument("--check", action="store_true",
                   help="write the fixture (to --out or a temporary directory) and run the Go comparison on it")
    p.add_argument("--eval", nargs="+", metavar="DIR",
                   help="instead: load each DIR/weights.safetensors (our export) with strict=True, run "
                        "DIR/input.safetensors, write DIR/torch.safetensors")
    args = p.parse_args()
    if args.eval:
        for d in args.eval:
            eval_exported(d)
        return
    if args.net not in DEFAULTS:
        p.error("unknown net %r; known: %s" % (args.net, ", ".join(sorted(DEFAULTS))))
    if not args.check:
        if not args.out:
            p.error("--out DIR is required")
        make_fixture(args)
        return
    tmp = None
    if not args.out:
        tmp = tempfile.TemporaryDirectory(prefix="torch_ref_")
        args.out = os.path.join(tmp.name, args.net)
    make_fixture(args)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TRAINER_TORCH_FIXTURES=os.path.abspath(args.out), GOMLX_NO_AUTO_INSTALL="1")
    cmd = ["go", "test", "./weights", "-run", "^TestTorchFixtures$", "-count=1", "-v", "-timeout", "60m"]
    print("+ TRAINER_TORCH_FIXTURES=%s %s" % (env["TRAINER_TORCH_FIXTURES"], " ".join(cmd)), flush=True)
    rc = subprocess.call(cmd, cwd=repo, env=env)
    if tmp:
        tmp.cleanup()
    sys.exit(rc)


if __name__ == "__main__":
    main()
