#!/usr/bin/env python3
"""Writes data/testdata/autoaugment_pil.json, the reference for data/autoaugment.go, from torchvision's
AutoAugment itself (torchvision 0.14, Pillow 9.4):
  - the IMAGENET policy table (AutoAugment._get_policies) and the magnitude bins of
    _augmentation_space(10, (h, w)) for several image sizes, and Translate's bins for more sides;
  - the affine matrix every geometric (op, bin, sign) hands to PIL's Image.transform, caught by wrapping
    Image.transform, as [width, height, op, bin, negative, matrix or null (Pillow copied)] for two sizes;
  - what torchvision's _apply_op makes of a real photo (a 23x17 crop of Go's image/testdata/video-001.png,
    RGB and L) for every (op, bin, sign) the policy uses, the others at bin 9 (RGB), and PIL affine transforms
    that take each of Pillow's three nearest-neighbour code paths; nearest (AutoAugment's default) and
    bilinear (what torchvision's references/classification/train.py passes) for the geometric ops (RGB);
  - whole AutoAugment.forward calls whose get_params draws (sub-policy, two probabilities, two signs)
    come from a port of Go's math/rand/v2 PCG in the order data/autoaugment.go draws them, so the Go test
    replays the same example bit for bit (outputs kept as SHA-256).
Run: /usr/bin/python3 scripts/pil_autoaugment_golden.py   (Debian's python3-torchvision and python3-pil)"""
import base64
import hashlib
import json
import os
import subprocess

import PIL
import torch
import torchvision
from PIL import Image
from torchvision.transforms import InterpolationMode
from torchvision.transforms import autoaugment as aa

W, H = 23, 17
SIZES = [(W, H), (224, 224), (256, 192), (331, 331), (5, 7)]  # (width, height), for the bins
MATRIX_SIZES = [(W, H), (224, 224)]  # centre on a half pixel and on a whole one
# Translate's bins scale with the side: more sides, common training sizes among them.
TRANSLATE_SIDES = [1, 2, 3, 13, 31, 96, 112, 128, 160, 176, 192, 240, 256, 288, 299, 300, 320, 380, 384, 448,
                   456, 480, 512, 528, 600, 1000]
GEOMETRIC = ["ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate"]
EXTRA = ["ShearY", "TranslateX", "TranslateY", "Brightness"]  # in the op space, not in the IMAGENET policy
NEAREST, BILINEAR = InterpolationMode.NEAREST, InterpolationMode.BILINEAR


def b64(im):
    return base64.b64encode(im.tobytes()).decode()


def photo():
    goroot = subprocess.run(["go", "env", "GOROOT"], capture_output=True, text=True, check=True).stdout.strip()
    src = Image.open(os.path.join(goroot, "src", "image", "testdata", "video-001.png")).convert("RGB")
    # The right speaker's face, shirt and the wall behind: skin, dark cloth, highlights.
    return src.resize((W, H), Image.BOX, box=(80, 0, 150, 53))


# Go's math/rand/v2 PCG (128-bit LCG, DXSM output) and data's uniform and boundedUint64.
M64 = (1 << 64) - 1
PCG_MUL = (2549297995355413924 << 64) | 4865540595714422341
PCG_INC = (6364136223846793005 << 64) | 1442695040888963407


class PCG:
    def __init__(self, seed1, seed2):
        self.state = (seed1 << 64) | seed2

    def uint64(self):
        self.state = (self.state * PCG_MUL + PCG_INC) & ((1 << 128) - 1)
        hi, lo = self.state >> 64, self.state & M64
        hi ^= hi >> 32
        hi = (hi * 0xDA942042E4DD58B5) & M64
        hi ^= hi >> 48
        return (hi * (lo | 1)) & M64

    def uniform(self):
        return (self.uint64() >> 11) / (1 << 53)

    def bounded(self, n):
        p = self.uint64() * n
        hi, lo = p >> 64, p & M64
        if lo < n:
            thresh = ((1 << 64) - n) % n
            while lo < thresh:
                p = self.uint64() * n
                hi, lo = p >> 64, p & M64
        return hi


def draws(rng, n):
    """data/autoaugment.go's draws: sub-policy, the two probabilities, the two signs (uniform < 0.5:
    negative, torchvision's signs[i] == 0)."""
    sub = rng.bounded(n)
    probs = [rng.uniform(), rng.uniform()]
    neg = [rng.uniform() < 0.5, rng.uniform() < 0.5]
    return sub, probs, neg


def magnitude(space, op, b, negative):
    mags, signed = space[op]
    m = float(mags[b].item()) if b is not None else 0.0
    return -m if signed and negative else m


def main():
    policy = aa.AutoAugment(aa.AutoAugmentPolicy.IMAGENET)
    table = [[list(step) for step in sub] for sub in policy.policies]

    spaces = []
    for w, h in SIZES:
        sp = policy._augmentation_space(10, (h, w))
        spaces.append({"width": w, "height": h,
                       "ops": {k: {"signed": s, "mags": [float(x) for x in v.reshape(-1)]} for k, (v, s) in sp.items()}})

    translate = {str(side): [float(x) for x in policy._augmentation_space(10, (side, side))["TranslateY"][0]]
                 for side in TRANSLATE_SIDES}

    # The matrix each geometric op gives Image.transform (None: Pillow's rotate copied without one).
    caught = []
    orig_transform = Image.Image.transform

    def catching(self, size, method, data=None, *args, **kw):
        caught.append([float(v) for v in data])
        return orig_transform(self, size, method, data, *args, **kw)

    Image.Image.transform = catching
    matrices = []
    for w, h in MATRIX_SIZES:
        img = Image.new("RGB", (w, h))
        space = policy._augmentation_space(10, (h, w))
        for op in GEOMETRIC:
            for b in range(10):
                for neg in (False, True):
                    caught.clear()
                    aa._apply_op(img, op, magnitude(space, op, b, neg), interpolation=NEAREST, fill=None)
                    matrices.append([w, h, op, b, neg, caught[0] if caught else None])
    Image.Image.transform = orig_transform

    used = sorted({(op, b) for sub in table for op, _, b in sub})
    rgb = photo()
    images = []
    for mode in ("RGB", "L"):
        img = rgb.convert(mode)
        space = policy._augmentation_space(10, (H, W))
        todo = [(op, b) for op, b in used]
        if mode == "RGB":
            todo += [(op, 9) for op in EXTRA]
        cases = []
        for op, b in todo:
            signed = space[op][1]
            for neg in (False, True) if signed else (False,):
                for interp in (NEAREST, BILINEAR) if op in GEOMETRIC and mode == "RGB" else (NEAREST,):
                    out = aa._apply_op(img, op, magnitude(space, op, b, neg), interpolation=interp, fill=None)
                    cases.append({"op": op, "bin": b, "negative": neg, "bilinear": interp == BILINEAR,
                                  "output": b64(out)})
        affine = []
        for m in [(1, 0, -3, 0, 1, 2), (0.7, 0, 1.3, 0, 1.6, -2.2),  # Pillow's ImagingScaleAffine
                  (0.9, 0.2, 1.1, -0.3, 1.05, 2.5),  # affine_fixed (16.16 fixed point)
                  (0.37, 40000, -19999.1, 0.21, 0.83, 0.4)]:  # a corner beyond 32768: the float loop
            out = img.transform(img.size, Image.AFFINE, m, resample=Image.NEAREST, fillcolor=0)
            affine.append({"matrix": m, "output": b64(out)})
        applies = []
        for bilinear in (False, True):
            for s in range(32):
                seed = [s, 0x5EED + 7 * s]
                sub, probs, neg = draws(PCG(*seed), len(table))
                t = aa.AutoAugment(aa.AutoAugmentPolicy.IMAGENET, interpolation=BILINEAR if bilinear else NEAREST)
                # float64 probabilities: torchvision's float32 torch.rand would compare p in float32.
                t.get_params = lambda n, d=(sub, torch.tensor(probs, dtype=torch.float64),
                                            torch.tensor([0 if v else 1 for v in neg])): d
                out = t(img)
                applies.append({"seed": seed, "bilinear": bilinear, "sub": sub, "probs": probs, "negative": neg,
                                "sha256": hashlib.sha256(out.tobytes()).hexdigest()})
        images.append({"mode": mode, "width": W, "height": H, "input": b64(img), "cases": cases,
                       "affine": affine, "apply": applies})

    out = {"pillow": PIL.__version__, "torchvision": torchvision.__version__, "policy": table,
           "space": spaces, "translate": translate, "matrices": matrices, "images": images}
    path = os.path.join(os.path.dirname(__file__), "..", "data", "testdata", "autoaugment_pil.json")
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
    n = sum(len(im["cases"]) for im in images)
    print("wrote", os.path.normpath(path), "with", n, "op cases,", len(matrices), "matrices, torchvision",
          torchvision.__version__, "Pillow", PIL.__version__)


if __name__ == "__main__":
    main()
