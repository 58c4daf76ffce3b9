#!/usr/bin/env python3
"""Parity with timm itself (GPU check stage 4): timm's own model, random weights, our import.

    python3 scripts/timm_parity.py --net mobilenetv4_conv_medium --trainer .devbin/trainer --out DIR [--backend go] [--json]

Builds timm's model (mobilenetv4_conv_medium, or vit_tiny_patch16_224 for our vit_tiny) with random weights
-- every BatchNorm given random running statistics and affine parameters, every parameter timm
initialises to a constant (biases, the class token) given random values -- in eval mode, and saves its
state_dict to DIR/weights.safetensors under timm's names. It writes a PNG (DIR/image.png), scores it with
timm after torchvision's eval transform (resize 256 bilinear antialiased, center crop 224, ImageNet mean and
std: what `trainer predict` reproduces to the last bit on PNG input, docs/weights.md), and runs
`trainer predict --net NET --weights DIR/weights.safetensors --top 5` on the same file. The check passes
when the top-5 classes agree and their probabilities differ by at most 2e-5 (predict prints them to 1e-5).
Exit status: 0 agree, 1 disagree or predict failed, 2 missing packages (torch, torchvision, timm, safetensors,
numpy, Pillow).
"""
import argparse
import json
import os
import re
import subprocess
import sys

try:
    import numpy as np
    import torch
    import timm
    from PIL import Image
    from safetensors.torch import save_file
    from torchvision import transforms
except ImportError as err:
    print(f"timm_parity: needs torch, torchvision, timm, safetensors, numpy and Pillow: {err}", file=sys.stderr)
    sys.exit(2)

TIMM_NAMES = {"mobilenetv4_conv_medium": "mobilenetv4_conv_medium", "vit_tiny": "vit_tiny_patch16_224"}


def randomize(model, gen):
    """Random values where timm's init leaves constants, so a mistaken mapping of any of them shows."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=gen) + 0.5)
        for name, p in model.named_parameters():
            if p.dim() <= 1 or "cls_token" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.1 + (1.0 if name.endswith("weight") else 0.0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--net", choices=sorted(TIMM_NAMES), required=True)
    ap.add_argument("--trainer", required=True, help="the trainer binary")
    ap.add_argument("--out", required=True)
    ap.add_argument("--backend", default="go")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    gen = torch.Generator().manual_seed(7)
    model = timm.create_model(TIMM_NAMES[args.net], pretrained=False, num_classes=1000)
    randomize(model, gen)
    model.eval()
    weights = os.path.join(args.out, "weights.safetensors")
    save_file({k: v.detach().contiguous().float() for k, v in model.state_dict().items()
               if not k.endswith("num_batches_tracked")}, weights)

    rng = np.random.default_rng(3)
    yy, xx = np.mgrid[0:260, 0:300].astype(np.float32)
    img = 128 + 90 * np.sin(xx[..., None] * rng.uniform(-1, 1, 3) / 30 + yy[..., None] * rng.uniform(-1, 1, 3) / 25)
    image = os.path.join(args.out, "image.png")
    Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(image)

    tf = transforms.Compose([transforms.Resize(256, interpolation=transforms.InterpolationMode.BILINEAR, antialias=True),
                             transforms.CenterCrop(224), transforms.ToTensor(),
                             transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
    with torch.no_grad():
        probs = torch.softmax(model(tf(Image.open(image).convert("RGB"))[None]).double(), -1)[0]
    top = torch.topk(probs, 5)
    want = [(int(i), float(p)) for p, i in zip(top.values, top.indices)]

    cmd = [args.trainer, "predict", "--net", args.net, "--weights", weights, "--top", "5", "--backend", args.backend, image]
    run = subprocess.run(cmd, capture_output=True, text=True)
    got = [(int(m.group(2)), float(m.group(1)) / 100)
           for m in re.finditer(r"^\s+\d+\s+([0-9.]+)%\s+class (\d+)$", run.stdout, re.M)]
    ok = run.returncode == 0 and len(got) == 5 and [g[0] for g in got] == [w[0] for w in want]
    diff = max((abs(g[1] - w[1]) for g, w in zip(got, want)), default=float("inf"))
    ok = ok and diff <= 2e-5
    out = sys.stderr if args.json else sys.stdout
    print(f"timm {timm.__version__} {TIMM_NAMES[args.net]}: top-5 {want}", file=out)
    print(f"trainer predict ({args.backend}): top-5 {got}; max |Δp| {diff:.2e}: {'agree' if ok else 'DISAGREE'}", file=out)
    if run.returncode != 0:
        print(run.stdout + run.stderr, file=out)
    if args.json:
        print(json.dumps({"check": "timm_parity", "net": args.net, "backend": args.backend, "timm": timm.__version__,
                          "top5_timm": want, "top5_trainer": got, "max_abs_prob_diff": diff, "ok": ok}), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
