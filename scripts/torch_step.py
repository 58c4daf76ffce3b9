#!/usr/bin/python3
"""PyTorch-CPU peer of `trainer bench --net NET`: times one SGD-momentum train step (softmax
cross-entropy, float32, random data, training mode) of NET's PyTorch reference (scripts/torch_reference.py:
torchvision's models, ViT-Tiny as VisionTransformer(size, 16, 12 layers, 3 heads, 192, 768), the small
nets and MobileNetV4-Conv-M as nn.Modules) at a given batch and resolution, on every core.

    torch_step.py NET BATCH SIZE [STEPS] [--json] [--threads N]

Prints the median, minimum and maximum step time, which BLAS torch uses and its thread count. --threads
N uses N threads instead of every core (the caller sets OPENBLAS_NUM_THREADS to match)."""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_reference import DEFAULTS, build  # noqa: E402
from torch_step_timing import time_sgd_steps  # noqa: E402


def blas():
    """The BLAS library libblas.so.3 resolves to (Debian's alternatives), and torch's own view."""
    alt = "/etc/alternatives/libblas.so.3-x86_64-linux-gnu"
    path = os.path.realpath(alt) if os.path.exists(alt) else "unknown (no %s)" % alt
    cfg = torch.__config__.show()
    info = [l.strip() for l in cfg.splitlines() if "BLAS_INFO" in l or "Build settings" in l]
    blas_info = "?"
    for l in info:
        for part in l.split(","):
            if "BLAS_INFO" in part:
                blas_info = part.split("=", 1)[1].strip()
    return path, blas_info


def main():
    argv = sys.argv[1:]
    threads = os.cpu_count()
    if "--threads" in argv:
        i = argv.index("--threads")
        threads = int(argv[i + 1])
        del argv[i:i + 2]
    args = [a for a in argv if a != "--json"]
    as_json = "--json" in argv
    if len(args) < 3 or args[0] not in DEFAULTS:
        raise SystemExit(__doc__ + "\nnets: " + ", ".join(sorted(DEFAULTS)))
    net_name, batch, size = args[0], int(args[1]), int(args[2])
    steps = int(args[3]) if len(args) > 3 else 10
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    _, channels, classes = DEFAULTS[net_name]
    net = build(net_name, 1.0, size, classes)
    net.train()
    x = torch.randn(batch, channels, size, size)
    y = torch.randint(0, classes, (batch,))
    times = time_sgd_steps(net, x, y, lr=0.01, steps=steps, warmup=2)
    median = times[len(times) // 2]
    lib, blas_info = blas()
    row = {"net": net_name, "batch": batch, "size": size, "steps": steps, "median_ms": median * 1000,
           "min_ms": times[0] * 1000, "max_ms": times[-1] * 1000, "images_per_s": batch / median,
           "torch": torch.__version__, "threads": torch.get_num_threads(), "blas": lib, "torch_blas_info": blas_info,
           "parameters": sum(p.numel() for p in net.parameters())}
    if as_json:
        print(json.dumps(row))
        return
    print(f"pytorch {torch.__version__} {net_name} threads={row['threads']} batch={batch} size={size}: "
          f"median {row['median_ms']:.1f} ms/step (min {row['min_ms']:.1f}, max {row['max_ms']:.1f} over {steps}), "
          f"{row['images_per_s']:.0f} images/s; BLAS {lib} (torch BLAS_INFO={blas_info})")


if __name__ == "__main__":
    main()
