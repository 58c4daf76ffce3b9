#!/usr/bin/env python3
"""Writes data/testdata/randaugment_pil.json: a fixed 13x11 RGB image and what Pillow's operations (the
ones timm's RandAugment calls, with timm's fill colour; the geometric ones with bilinear and with bicubic
resampling, timm's two) make of it. The Go test
TestRandAugmentOpsMatchPillow compares data/randaugment.go against it.
Run: /usr/bin/python3 scripts/pil_randaugment_golden.py   (Pillow 9.4 from Debian's python3-pil)"""
import json
import os
import PIL
from PIL import Image, ImageEnhance, ImageOps

W, H = 13, 11
FILL = (124, 116, 104)
pixels = [((x * 37 + y * 11) % 256, (x * 5 + y * 53 + 17) % 256, (x * y * 7 + 90) % 256) for y in range(H) for x in range(W)]
img = Image.new("RGB", (W, H))
img.putdata(pixels)


def affine(m, resample=Image.BILINEAR):
    return img.transform(img.size, Image.AFFINE, m, resample=resample, fillcolor=FILL)


def solarize_add(add, thresh=128):
    lut = [min(255, i + add) if i < thresh else i for i in range(256)]
    return img.point(lut * 3)


cases = {
    "invert": ImageOps.invert(img),
    "posterize_3": ImageOps.posterize(img, 3),
    "solarize_100": ImageOps.solarize(img, 100),
    "solarize_add_60": solarize_add(60),
    "autocontrast": ImageOps.autocontrast(img),
    "equalize": ImageOps.equalize(img),
    "color_0.3": ImageEnhance.Color(img).enhance(0.3),
    "color_1.7": ImageEnhance.Color(img).enhance(1.7),
    "contrast_1.6": ImageEnhance.Contrast(img).enhance(1.6),
    "brightness_0.6": ImageEnhance.Brightness(img).enhance(0.6),
    "sharpness_1.8": ImageEnhance.Sharpness(img).enhance(1.8),
    "rotate_30": img.rotate(30, resample=Image.BILINEAR, fillcolor=FILL),
    "rotate_180": img.rotate(180, resample=Image.BILINEAR, fillcolor=FILL),
    "rotate_-12.5": img.rotate(-12.5, resample=Image.BILINEAR, fillcolor=FILL),
    "shear_x_0.3": affine((1, 0.3, 0, 0, 1, 0)),
    "shear_y_-0.2": affine((1, 0, 0, -0.2, 1, 0)),
    "translate_x_3.5": affine((1, 0, 3.5, 0, 1, 0)),
    "rotate_30_bicubic": img.rotate(30, resample=Image.BICUBIC, fillcolor=FILL),
    "rotate_-12.5_bicubic": img.rotate(-12.5, resample=Image.BICUBIC, fillcolor=FILL),
    "shear_x_0.3_bicubic": affine((1, 0.3, 0, 0, 1, 0), Image.BICUBIC),
    "shear_y_-0.2_bicubic": affine((1, 0, 0, -0.2, 1, 0), Image.BICUBIC),
    "translate_x_3.5_bicubic": affine((1, 0, 3.5, 0, 1, 0), Image.BICUBIC),
    "translate_y_-4.25_bicubic": affine((1, 0, 0, 0, 1, -4.25), Image.BICUBIC),
}
out = {"pillow": PIL.__version__, "width": W, "height": H, "input": [v for p in pixels for v in p],
       "cases": {k: [v for p in im.getdata() for v in p] for k, im in cases.items()}}
path = os.path.join(os.path.dirname(__file__), "..", "data", "testdata", "randaugment_pil.json")
with open(path, "w") as f:
    json.dump(out, f, separators=(",", ":"))
print("wrote", os.path.normpath(path), "with", len(cases), "cases from Pillow", PIL.__version__)
