#!/usr/bin/python3
"""PIL + torchvision peer of data.BenchmarkDecodeRandomResizedCrop: images/s on one core for
read + decode + RandomResizedCrop(224) + flip + ToTensor + Normalize over the same JPEGs.

    TRAINER_BENCH_JPEGS=/tmp/benchjpegs go test ./data -run XXX -bench DecodeRandomResizedCrop -cpu 1
    /usr/bin/python3 scripts/pil_augment_bench.py /tmp/benchjpegs [seconds]
"""
import glob, sys, time

import torch
from PIL import Image
from torchvision import transforms as T

torch.set_num_threads(1)
paths = sorted(glob.glob(sys.argv[1] + "/*.jpg"))
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 5
for name, mode in [("bilinear", T.InterpolationMode.BILINEAR), ("bicubic", T.InterpolationMode.BICUBIC)]:
    tf = T.Compose([T.RandomResizedCrop(224, interpolation=mode), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    n, start, cpu0 = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - start < seconds:
        with open(paths[n % len(paths)], "rb") as f:
            tf(Image.open(f).convert("RGB"))
        n += 1
    rate, cpu_rate = n / (time.perf_counter() - start), n / (time.process_time() - cpu0)
    print(f"PIL {Image.__version__} + torchvision {name}: {rate:.1f} images/s on one core, "
          f"{cpu_rate:.1f} per CPU-second ({len(paths)} JPEGs)")
