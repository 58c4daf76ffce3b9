#!/usr/bin/python3
"""Time to accuracy, ours against PyTorch: `trainer run CONFIG` and scripts/torch_recipe.py's same recipe,
alternating recipe by recipe and round by round on the same cores, each timed end to end (process start
to exit, the final eval included), then one table of test top-1 and wall seconds (docs/benchmarks.md).

    recipe_peer.py TRAINER [--rounds R] [--configs configs/mnist_fast.yaml,configs/mnist_cnn.yaml] [--threads N]

TRAINER is the trainer binary; each run of ours writes to a fresh temporary run directory. Wall times on a
shared machine are worth what the load average printed beside them says; the CPU seconds (user + system of
the finished process) are printed too."""
import argparse
import datetime
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def load():
    return " ".join(open("/proc/loadavg").read().split()[:3])


def timed(cmd, env):
    """Runs cmd, returning (stdout, wall seconds, CPU seconds of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {res.returncode}:\n{res.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return res.stdout, wall, cpu


def ours(trainer, config, env):
    run_dir = tempfile.mkdtemp(prefix="recipe-peer-")
    try:
        _, wall, cpu = timed([trainer, "run", config, "--no-progress", "--set", f"run_dir={run_dir}"], env)
        top1 = None
        for root, _, files in os.walk(run_dir):
            if "metrics.jsonl" in files:
                for line in open(os.path.join(root, "metrics.jsonl")):
                    rec = json.loads(line)
                    if rec.get("type") == "eval":
                        top1 = rec["top1"]
        if top1 is None:
            raise SystemExit(f"{config}: no eval record in {run_dir}")
        return {"top1": top1, "wall_s": wall, "cpu_s": cpu}
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def peer(config, threads, env):
    out, wall, cpu = timed(["/usr/bin/python3", os.path.join(HERE, "torch_recipe.py"), config, "--threads",
                            str(threads), "--json"], env)
    row = json.loads(out.strip().splitlines()[-1])
    return {"top1": row["top1"], "wall_s": wall, "cpu_s": cpu}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trainer")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--configs", default="configs/mnist_fast.yaml,configs/mnist_cnn.yaml")
    ap.add_argument("--threads", type=int, default=0, help="threads for both (default: every core)")
    args = ap.parse_args()
    threads = args.threads or os.cpu_count()
    env = dict(os.environ, GOMLX_NO_AUTO_INSTALL="1")
    if args.threads:
        env["GOMAXPROCS"] = env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"] = str(args.threads)
    configs = [c if os.path.isabs(c) else os.path.join(ROOT, c) for c in args.configs.split(",")]
    print(f"# {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, {threads} threads each, "
          f"OpenBLAS core {env.get('CPU_PEER_BLAS_CORE', 'not checked')}"
          f"{' (OPENBLAS_CORETYPE=' + env['OPENBLAS_CORETYPE'] + ')' if env.get('OPENBLAS_CORETYPE') else ''}, "
          f"OMP_WAIT_POLICY={env.get('OMP_WAIT_POLICY', 'default')}, load average before {load()}", flush=True)
    results = []
    for config in configs:
        o, p = [], []
        for r in range(args.rounds):
            o.append(ours(args.trainer, config, env))
            p.append(peer(config, threads, env))
            print(f"  {os.path.basename(config)} round {r + 1}: ours {100 * o[-1]['top1']:.2f}% {o[-1]['wall_s']:.1f} s "
                  f"(CPU {o[-1]['cpu_s']:.1f} s), pytorch {100 * p[-1]['top1']:.2f}% {p[-1]['wall_s']:.1f} s "
                  f"(CPU {p[-1]['cpu_s']:.1f} s) (load {load()})", file=sys.stderr, flush=True)
        results.append((config, o, p))
    print(f"# {args.rounds} rounds, load average after {load()}")
    print()
    print("| recipe | ours: test top-1 | ours: wall s, min / median (CPU s median) | PyTorch: test top-1 | PyTorch: wall s, min / median (CPU s median) | ours / PyTorch wall (median), per round |")
    print("|---|---|---|---|---|---|")
    for config, o, p in results:
        ow, pw = [x["wall_s"] for x in o], [x["wall_s"] for x in p]
        ratios = sorted(a / b for a, b in zip(ow, pw))
        acc = lambda rows: ", ".join(f"{100 * x['top1']:.2f}" for x in rows) + "%"
        print(f"| `{os.path.relpath(config, ROOT)}` | {acc(o)} | {min(ow):.1f} / {statistics.median(ow):.1f} "
              f"({statistics.median(x['cpu_s'] for x in o):.1f}) | {acc(p)} | {min(pw):.1f} / {statistics.median(pw):.1f} "
              f"({statistics.median(x['cpu_s'] for x in p):.1f}) | **{statistics.median(ow) / statistics.median(pw):.2f}×** "
              f"({ratios[0]:.2f}–{ratios[-1]:.2f}) |")


if __name__ == "__main__":
    main()
