#!/usr/bin/python3
"""Writes data/testdata/jpeg/*.jpg and pil_decode.json (run inside data/testdata/jpeg)."""
import hashlib, json, numpy as np, PIL
from PIL import Image
w, h = 203, 151
y, x = np.mgrid[0:h, 0:w]
rng = np.random.default_rng(7)
r = 120 + 90*np.sin(x*0.05)*np.cos(y*0.04) + rng.integers(0, 24, (h, w))
g = 100 + 60*np.sin((x+y)*0.02) + rng.integers(0, 24, (h, w))
b = 128 - 80*np.sin(x*0.05) + rng.integers(0, 24, (h, w))
img = np.stack([r, g, b], -1)
img[40:90, 60:140] = [250, 10, 20]
img[95:130, 20:75] = [10, 200, 240]
im = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB")
cases = {
  "rgb420.jpg": lambda f: im.save(f, quality=90, subsampling=2),
  "rgb422.jpg": lambda f: im.save(f, quality=90, subsampling=1),
  "rgb444.jpg": lambda f: im.save(f, quality=90, subsampling=0),
  "prog420.jpg": lambda f: im.save(f, quality=85, subsampling=2, progressive=True),
  "grey.jpg": lambda f: im.convert("L").save(f, quality=90),
  "cmyk.jpg": lambda f: im.convert("CMYK").save(f, quality=90),
}
golden = {"pillow": PIL.__version__, "width": w, "height": h, "rgb_sha256": {}, "grey_sha256": {}}
for name, save in cases.items():
    save(name)
    with Image.open(name) as d:
        if d.mode == "CMYK":
            continue
        golden["rgb_sha256"][name] = hashlib.sha256(d.convert("RGB").tobytes()).hexdigest()
    with Image.open(name) as d:
        if d.mode == "L":
            golden["grey_sha256"][name] = hashlib.sha256(d.tobytes()).hexdigest()
json.dump(golden, open("pil_decode.json", "w"), indent=1)
