#!/usr/bin/python3
"""Writes the PyTorch checkpoint (.pth) fixtures of the weights and trainer tests (docs/weights.md).

    scripts/torch_pth_fixtures.py            # rewrites every fixture below (seeded: reruns give the same tensors)

Under weights/testdata/:
    pth/tensors.pth          torch.save of an OrderedDict of tensors in the zip format: every storage type
                             (float32/64/16, bfloat16, int64/32/16/8, uint8, bool), a 0-dim tensor, a transposed
                             (non-contiguous) view, two views into one storage at different offsets
    pth/tensors_legacy.pth   the same with _use_new_zipfile_serialization=False (torchvision's older format)
    pth/tensors.json         each tensor's dtype, shape and row-major values, which the Go reader must return
    mobilenet_v2/weights.pth torch.save(model.state_dict()) of torchvision's mobilenet_v2(width_mult=0.25,
                             num_classes=10) holding mobilenet_v2/weights.safetensors (float16, as that file):
                             imported, it must give the logits the safetensors file gives
Under trainer/testdata/finetune/:
    stripes4.pth             our resnet50's reference (torchvision Bottleneck blocks, width 1/16) at 32 px,
                             trained in torch on 4 classes of stripes (horizontal, vertical, two diagonals),
                             stored in float16: what TestFineTuneLearnsFasterThanScratch fine-tunes

Runs under Debian's /usr/bin/python3 (torch 1.13, torchvision 0.14).
"""

import json
import math
import os
import sys
from collections import OrderedDict

import torch
import torch.nn.functional as F
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_reference  # noqa: E402  (the reference nets and the safetensors reader)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tensors_fixture(out):
    g = torch.Generator().manual_seed(0)
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6) / 8 - 1
    shared = torch.randn(10, generator=g)
    sd = OrderedDict()
    sd["conv.weight"] = torch.randn(2, 1, 3, 3, generator=g)
    sd["f64"] = torch.randn(3, generator=g).double()
    sd["f16"] = torch.randn(2, 2, generator=g).half()
    sd["bf16"] = torch.randn(5, generator=g).bfloat16()
    sd["i64"] = torch.tensor([-3, 0, 2 ** 40], dtype=torch.int64)
    sd["i32"] = torch.tensor([[-7, 8]], dtype=torch.int32)
    sd["i16"] = torch.tensor([-300, 300], dtype=torch.int16)
    sd["i8"] = torch.tensor([-128, 127], dtype=torch.int8)
    sd["u8"] = torch.tensor([0, 255], dtype=torch.uint8)
    sd["bool"] = torch.tensor([True, False, True])
    sd["bn.num_batches_tracked"] = torch.tensor(7)  # 0-dim int64, as BatchNorm2d keeps it
    sd["transposed"] = base.t()  # [6, 4] with strides (1, 6)
    sd["view_a"] = shared[2:5]  # two views into one storage
    sd["view_b"] = shared[5:].view(5, 1)
    sd["empty"] = torch.zeros(0, 3)
    os.makedirs(out, exist_ok=True)
    torch.save(sd, os.path.join(out, "tensors.pth"))
    torch.save(sd, os.path.join(out, "tensors_legacy.pth"), _use_new_zipfile_serialization=False)
    dtypes = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.bfloat16: "BF16",
              torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
              torch.bool: "BOOL"}
    want = {k: {"dtype": dtypes[v.dtype], "shape": list(v.shape),
                "values": [float(x) for x in v.contiguous().reshape(-1).double().tolist()]} for k, v in sd.items()}
    with open(os.path.join(out, "tensors.json"), "w") as f:
        json.dump(want, f, indent=1, sort_keys=True)
        f.write("\n")
    print("%s: %d tensors, zip and legacy" % (out, len(sd)))


def mobilenet_fixture(d):
    sd, meta = torch_reference.read_safetensors(os.path.join(d, "weights.safetensors"))
    model = torchvision.models.mobilenet_v2(width_mult=float(meta["width"]), num_classes=int(meta["classes"]))
    model.load_state_dict(sd, strict=True)
    half = OrderedDict((k, v if k.endswith("num_batches_tracked") else v.half()) for k, v in model.state_dict().items())
    torch.save(half, os.path.join(d, "weights.pth"))
    print("%s/weights.pth: torchvision mobilenet_v2 width %s, %d tensors" % (d, meta["width"], len(half)))


# The stripes task, as trainer/finetune_test.go draws it: class k's stripes run along direction k
# (0 horizontal, 1 vertical, 2 and 3 the diagonals), with a random period in [6, 12) px, phase and
# two random colours at least 0.3 apart on average, plus noise.
DIRECTIONS = [(0, 1), (1, 0), (1 / math.sqrt(2), 1 / math.sqrt(2)), (1 / math.sqrt(2), -1 / math.sqrt(2))]


def stripes(labels, size, g):
    n = len(labels)
    ys, xs = torch.meshgrid(torch.arange(size, dtype=torch.float32), torch.arange(size, dtype=torch.float32), indexing="ij")
    out = torch.empty(n, 3, size, size)
    for i, k in enumerate(labels.tolist()):
        dx, dy = DIRECTIONS[k]
        period = 6 + 6 * torch.rand(1, generator=g).item()
        phase = 2 * math.pi * torch.rand(1, generator=g).item()
        while True:
            fg, bg = torch.rand(3, generator=g), torch.rand(3, generator=g)
            if (fg - bg).abs().mean() >= 0.3:
                break
        on = torch.sin(2 * math.pi * (xs * dx + ys * dy) / period + phase) >= 0
        img = torch.where(on, fg[:, None, None], bg[:, None, None])
        out[i] = (img + 0.05 * torch.randn(3, size, size, generator=g)).clamp(0, 1)
    mean = torch.tensor([0.485, 0.456, 0.406])[:, None, None]
    std = torch.tensor([0.229, 0.224, 0.225])[:, None, None]
    return (out - mean) / std


def finetune_fixture(out, steps=800, batch=32, size=32):
    torch.manual_seed(1)
    g = torch.Generator().manual_seed(1)
    model = torch_reference.build("resnet50", 1 / 16, size, 4)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-4)
    model.train()
    for step in range(steps):
        labels = torch.randint(0, 4, (batch,), generator=g)
        loss = F.cross_entropy(model(stripes(labels, size, g)), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0 or step == steps - 1:
            print("  step %d loss %.3f" % (step, loss.item()))
    model.eval()
    labels = torch.arange(256) % 4
    with torch.no_grad():
        acc = (model(stripes(labels, size, g)).argmax(1) == labels).float().mean().item()
    half = OrderedDict((k, v if k.endswith("num_batches_tracked") else v.half()) for k, v in model.state_dict().items())
    os.makedirs(out, exist_ok=True)
    torch.save(half, os.path.join(out, "stripes4.pth"))
    print("%s/stripes4.pth: resnet50 x1/16, %d steps, eval top-1 %.3f on 256 fresh images" % (out, steps, acc))


def main():
    tensors_fixture(os.path.join(REPO, "weights", "testdata", "pth"))
    mobilenet_fixture(os.path.join(REPO, "weights", "testdata", "mobilenet_v2"))
    finetune_fixture(os.path.join(REPO, "trainer", "testdata", "finetune"))


if __name__ == "__main__":
    main()
