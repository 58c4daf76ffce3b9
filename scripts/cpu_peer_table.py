#!/usr/bin/python3
"""Ours against PyTorch-CPU, side by side, every registered net: one SGD-momentum train step each,
float32, the same cores, ours (`trainer bench --net NET`) and the peer (torch_step.py) alternating net
by net and round by round, then one table of ratios (docs/benchmarks.md).

    cpu_peer_table.py TRAINER [--rounds R] [--steps K] [--nets a,b,...] [--threads N] [--json FILE]

TRAINER is the trainer binary. A round times at least --min-round-ms of steps on our side: a net whose
K steps take less (MLP's 4-ms step: 5 steps are 20 ms, which the timer's and the machine's jitter move by
a quarter) runs as many more steps as make that time, in every round and for both sides; the first
round's run of K steps sets the count (and is that round's run when K steps were enough). Each cell is the min and the median over the
rounds of each run's median step time; the ratio is ours / PyTorch of those medians, and the range beside it the per-round ratios.
Ours is also given as GFLOP/s and as a percentage of the machine's peak (the pure-Go backend's own
float32 GEMM at 1024³, `trainer bench --peak`). The load average is printed before and after: on a
shared machine the figures are worth what it says. --threads N runs both on N threads (GOMAXPROCS for
ours; torch.set_num_threads and OPENBLAS_NUM_THREADS for the peer): with 1, the ratio is per-core
efficiency, which another process on the machine disturbs much less than it does two threads that
wait for each other."""
import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# (net, batch, size): the small nets at their own resolution, the ImageNet nets at 64 px.
ROWS = [
    ("mnist_cnn", 128, 28),
    ("mnist_fast", 128, 28),
    ("resnet34", 32, 32),
    ("resnet50", 8, 64),
    ("mobilenet_v2", 8, 64),
    ("efficientnet_b0", 8, 64),
    ("mobilenetv4_conv_medium", 8, 64),
    ("convnext_tiny", 8, 64),
    ("vit_tiny", 8, 64),
    ("shufflenet_v2_x1_0", 8, 64),
    ("densenet121", 8, 64),
    ("googlenet", 8, 64),
    ("swin_t", 8, 64),
    ("linear", 128, 28),
    ("mlp", 128, 28),
    ("cifar_cnn", 64, 32),
    ("cifar8", 32, 32),
    ("cifar8_bn", 32, 32),
]


def run_json(cmd, env=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    start = out.index("{")
    return json.loads(out[start:])


def load():
    return " ".join(open("/proc/loadavg").read().split()[:3])


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def torch_onednn():
    """Whether the peer's torch takes float32 convolutions through oneDNN (MKL-DNN)."""
    out = subprocess.run(["/usr/bin/python3", "-c", "import torch; b = torch.backends.mkldnn; print(b.is_available() and b.enabled)"],
                         capture_output=True, text=True).stdout
    return out.strip() == "True"


def registered(trainer):
    out = subprocess.run([trainer, "nets", "--json"], check=True, capture_output=True, text=True).stdout
    return [net["name"] for net in json.loads(out)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trainer")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--min-round-ms", type=float, default=250,
                    help="time at least this much of steps a round (more steps for short steps; 0: always --steps)")
    ap.add_argument("--nets", default="", help="comma-separated subset (default: every registered net)")
    ap.add_argument("--threads", type=int, default=0, help="threads for both (default: every core)")
    ap.add_argument("--json", default="", help="also write every run's report to this file")
    args = ap.parse_args()

    rows = list(ROWS)
    known = {r[0] for r in rows}
    for name in registered(args.trainer):
        if name not in known:
            print(f"note: {name} is registered but has no row here; timing it at batch 8, 64 px", file=sys.stderr)
            rows.append((name, 8, 64))
    if args.nets:
        wanted = args.nets.split(",")
        rows = [r for r in rows if r[0] in wanted]

    env = dict(os.environ)
    peer_threads = []
    if args.threads > 0:
        env["GOMAXPROCS"] = env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"] = str(args.threads)
        peer_threads = ["--threads", str(args.threads)]
    peak = run_json([args.trainer, "bench", "--peak", "--json"], env)
    load_before = load()
    print(f"# {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores ({cpu_model()}), "
          f"load average before {load_before}", flush=True)
    results = []
    longer = []  # (net, steps) for the nets timed over more than --steps steps
    for net, batch, size in rows:
        ours, peer = [], []
        ours_cmd = lambda k: [args.trainer, "bench", "--net", net, "--batch", str(batch), "--size", str(size),
                              "--steps", str(k), "--json"]
        steps = args.steps
        probe = run_json(ours_cmd(steps), env)
        if probe["median_ms"] * steps < args.min_round_ms:
            steps = min(1000, math.ceil(args.min_round_ms / max(probe["median_ms"], 0.01)))
            longer.append((net, steps))
        for r in range(args.rounds):
            # The probe is round 1's own run when it already timed enough steps.
            o = probe if r == 0 and steps == args.steps else run_json(ours_cmd(steps), env)
            p = run_json(["/usr/bin/python3", os.path.join(HERE, "torch_step.py"), net, str(batch), str(size),
                          str(steps), "--json"] + peer_threads, env)
            ours.append(o)
            peer.append(p)
            print(f"  {net} round {r + 1}: ours {o['median_ms']:.1f} ms, pytorch {p['median_ms']:.1f} ms "
                  f"(load {load()})", file=sys.stderr, flush=True)
        results.append((net, batch, size, ours, peer))
    load_after = load()

    p0 = results[0][4][0] if results else {}
    core = os.environ.get("CPU_PEER_BLAS_CORE", "not checked (run through scripts/cpu-peer.sh table)")
    coretype = os.environ.get("OPENBLAS_CORETYPE", "")
    print(f"# PyTorch {p0.get('torch', '?')}, {p0.get('threads', '?')} threads, BLAS {p0.get('blas', '?')} "
          f"(torch BLAS_INFO={p0.get('torch_blas_info', '?')}), OpenBLAS core {core}"
          f"{' (OPENBLAS_CORETYPE=' + coretype + ')' if coretype else ''}, oneDNN for convolutions: "
          f"{'yes' if torch_onednn() else 'no'}, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'default')}; ours: `trainer bench --net`, "
          f"{results[0][3][0]['threads'] if results else '?'} threads; peak {peak['peak_gflop_per_s']:.1f} GFLOP/s "
          f"({peak['peak_kernel']} GEMM, {peak['peak_n']}³); {args.rounds} rounds of {args.steps} steps"
          f"{' (at least ' + format(args.min_round_ms, 'g') + ' ms a round: ' + ', '.join(f'{n} {k}' for n, k in longer) + ' steps)' if longer else ''}, "
          f"load average after {load_after}")
    print()
    print("| net (batch, size) | ours ms/step, min / median | PyTorch ms/step, min / median | ours / PyTorch (median) | per round | ours GFLOP/s (% of peak) |")
    print("|---|---|---|---|---|---|")
    for net, batch, size, ours, peer in results:
        om = [o["median_ms"] for o in ours]
        pm = [p["median_ms"] for p in peer]
        ratios = sorted(a / b for a, b in zip(om, pm))
        med_o, med_p = statistics.median(om), statistics.median(pm)
        gflops = ours[0]["gflop_per_step"] / (med_o / 1000)
        ms = lambda x: f"{x:.1f}" if med_o < 10 or med_p < 10 else f"{x:.0f}"  # a 4-ms step's tenths matter
        print(f"| {net} ({batch}, {size}) | {ms(min(om))} / {ms(med_o)} | {ms(min(pm))} / {ms(med_p)} | "
              f"**{med_o / med_p:.2f}×** | {ratios[0]:.2f}–{ratios[-1]:.2f} | "
              f"{gflops:.1f} ({100 * gflops / peak['peak_gflop_per_s']:.0f}%) |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"peak": peak, "load_before": load_before, "load_after": load_after,
                       "rows": [{"net": n, "batch": b, "size": s, "ours": o, "pytorch": p} for n, b, s, o, p in results]},
                      f, indent=1)


if __name__ == "__main__":
    main()
