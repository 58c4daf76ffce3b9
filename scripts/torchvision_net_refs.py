#!/usr/bin/python3
"""Prints the structure numbers a net's Go test checks (graphs/*_test.go's netRef) for the PyTorch
reference that scripts/torch_reference.py builds:

    scripts/torchvision_net_refs.py NET [--width W] [--size S] [--classes C]

params: sum of numel over parameters(); noDecay: those of rank <= 1 (biases, norms) and Swin's
relative_position_bias_table; macs: every Conv2d's out_h·out_w·out_c·in_c/groups·kh·kw, every Linear's
in·out per row (forward hooks, one image) and, for Swin, each window attention's qkv and proj over the
padded windows' tokens and its q·kᵀ and attention·v (2·windows·n²·c for n tokens per window, as graphs
counts them); fingerprint:
the first 16 hex digits of the sha256 of the sorted lines "<key> <shape joined by x>" of state_dict()
without num_batches_tracked; keys: their number. Runs under Debian's /usr/bin/python3 (torch 1.13,
torchvision 0.14).
"""

import argparse
import hashlib

import torch
import torch.nn as nn
from torchvision.models.swin_transformer import ShiftedWindowAttention

from torch_reference import DEFAULTS, build


def refs(net, width, size, classes):
    model = build(net, width, size, classes).eval()
    macs = [0]

    def hook(m, inputs, out):
        if isinstance(m, nn.Conv2d):
            kh, kw = m.kernel_size
            macs[0] += out.shape[2] * out.shape[3] * out.shape[1] * (m.in_channels // m.groups) * kh * kw
        elif isinstance(m, nn.Linear):
            macs[0] += (out.numel() // out.shape[-1]) * m.in_features * m.out_features
        elif isinstance(m, ShiftedWindowAttention):
            _, h, w, c = inputs[0].shape
            wh, ww = m.window_size
            windows = -(-h // wh) * -(-w // ww)
            # Its qkv and proj are applied with F.linear (no module call), over the padded windows' tokens.
            macs[0] += windows * wh * ww * (4 * c * c) + 2 * windows * (wh * ww) ** 2 * c

    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear, ShiftedWindowAttention)):
            m.register_forward_hook(hook)
    with torch.no_grad():
        model(torch.zeros(1, DEFAULTS[net][1], size, size))
    params = sum(p.numel() for p in model.parameters())
    no_decay = sum(p.numel() for k, p in model.named_parameters()
                   if p.dim() <= 1 or k.endswith("relative_position_bias_table"))
    lines = sorted("%s %s" % (k, "x".join(str(d) for d in v.shape))
                   for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked"))
    digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]
    return params, no_decay, macs[0], digest, len(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("net", choices=sorted(DEFAULTS))
    p.add_argument("--width", type=float, default=1.0)
    p.add_argument("--size", type=int, default=0)
    p.add_argument("--classes", type=int, default=0)
    args = p.parse_args()
    size = args.size or DEFAULTS[args.net][0]
    classes = args.classes or DEFAULTS[args.net][2]
    params, no_decay, macs, digest, keys = refs(args.net, args.width, size, classes)
    print('netRef{params: %d, noDecay: %d, macs: %d, fingerprint: "%s", keys: %d, classes: %d}' % (
        params, no_decay, macs, digest, keys, classes))


if __name__ == "__main__":
    main()
