#!/usr/bin/python3
"""Times torch's 1024³ float32 matmul under the OpenBLAS core this process was started with
(OPENBLAS_CORETYPE, read when the library loads; empty: OpenBLAS's own detection) and prints one JSON
line: the core OpenBLAS reports, GFLOP/s (best of --reps products, timed by the thread's CPU clock on one
thread), torch's threads and whether oneDNN
(MKL-DNN) takes float32 convolutions. scripts/cpu-peer.sh runs it once per candidate core.

    OPENBLAS_VERBOSE=2 OPENBLAS_CORETYPE=HASWELL openblas_core.py [--threads N] [--reps R]"""
import argparse
import json
import os
import re
import time

import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1, help="1 (default) measures the kernel, which a busy machine disturbs least")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--n", type=int, default=1024)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    a, b = torch.randn(args.n, args.n), torch.randn(args.n, args.n)
    for _ in range(3):
        a @ b
    # On one thread OpenBLAS computes in the calling thread, so its CPU clock counts the product's own
    # time and not the time other processes on a shared machine take the core away.
    clock = time.thread_time if args.threads == 1 else time.perf_counter
    best = float("inf")
    for _ in range(args.reps):
        t = clock()
        a @ b
        best = min(best, clock() - t)
    cfg = torch.__config__.show()
    onednn = re.search(r"MKL-DNN v([0-9.]+)", cfg)
    print(json.dumps({
        "coretype": os.environ.get("OPENBLAS_CORETYPE", ""),
        "gflop_per_s": round(2 * args.n ** 3 / best / 1e9, 1),
        "threads": torch.get_num_threads(),
        "onednn": onednn.group(1) if onednn else "",
        "onednn_convolutions": bool(torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled),
        "torch": torch.__version__,
    }), flush=True)


if __name__ == "__main__":
    main()
