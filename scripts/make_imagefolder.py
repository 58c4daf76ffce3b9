#!/usr/bin/env python3
"""Writes a synthetic ImageFolder of JPEGs for timing the input pipeline (scripts/device-check.sh).

    python3 scripts/make_imagefolder.py OUT --images 2000 --classes 10 [--width 400 --height 350] [--val 100]

OUT/train/cNNN/*.jpg (and OUT/val/... when --val > 0): photograph-sized images (default 400x350, about
ImageNet's mean) of smooth colour gradients with noise, quality 90, 4:2:0 -- JPEGs that cost about what
a photograph costs to decode. Deterministic for a --seed. Needs numpy and Pillow.
"""
import argparse
import os
import sys

try:
    import numpy as np
    from PIL import Image
except ImportError as err:
    print(f"make_imagefolder: needs numpy and Pillow: {err}", file=sys.stderr)
    sys.exit(2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--images", type=int, default=2000, help="train images in all")
    ap.add_argument("--val", type=int, default=0, help="val images in all")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--width", type=int, default=400)
    ap.add_argument("--height", type=int, default=350)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    h, w = args.height, args.width
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    for split, n in (("train", args.images), ("val", args.val)):
        for i in range(n):
            c = i % args.classes
            d = os.path.join(args.out, split, f"c{c:03d}")
            os.makedirs(d, exist_ok=True)
            a, b, p = rng.uniform(-1, 1, 3), rng.uniform(-1, 1, 3), rng.uniform(0, 255, 3)
            img = p + 80 * np.sin(xx[..., None] * a / 40 + yy[..., None] * b / 30)
            img += rng.normal(0, 12, (h, w, 3))
            Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(
                os.path.join(d, f"{split}_{i:05d}.jpg"), quality=90, subsampling=2)
    print(f"wrote {args.images} train and {args.val} val images in {args.classes} classes under {args.out}")


if __name__ == "__main__":
    sys.exit(main())
