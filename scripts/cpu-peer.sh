#!/usr/bin/env bash
# Runs the PyTorch-CPU peers of `trainer bench` and `trainer run` on this machine, so our figures can be
# put beside them (docs/benchmarks.md). Installs Debian's python3-torch, python3-torchvision and
# libopenblas0-pthread when missing (Debian's torch takes its matrix products from whatever libblas.so.3
# is installed; the reference BLAS a fresh machine has makes every Linear 3-7x slower than a user's
# PyTorch), then sets the peer up right for this CPU and prints how: the CPU, the BLAS library, the
# OpenBLAS core its kernels come from, torch's threads and whether oneDNN takes the convolutions.
#
# The OpenBLAS core: Debian 12's OpenBLAS 0.3.21 does not know every new CPU and may fall back to old
# kernels (Prescott's SSE3 on an Emerald Rapids Xeon: 22 GFLOP/s where SKYLAKEX gives 171), or pick a
# family whose kernels are not the fastest on this one (Cooperlake's AVX-512 on an AMD Zen 4, where
# HASWELL's AVX2 kernels ran faster). So unless OPENBLAS_CORETYPE is already set (then it is kept and
# reported), the script times torch's 1024^3 matmul on one thread under OpenBLAS's own choice and under
# each family the CPU can run (SKYLAKEX with AVX-512, HASWELL with AVX2, ZEN on AMD), alternating
# CORE_ROUNDS rounds (default 3), and exports the fastest for everything it runs.
# Usage:
#   scripts/cpu-peer.sh table [rounds] [steps] [threads]
#                                                  every registered net, ours and PyTorch alternating,
#                                                  one ratio table (TRAINER=path: our binary, else built;
#                                                  threads: both on that many, default every core;
#                                                  NETS=a,b: only those nets; a round times at least
#                                                  250 ms of steps, more steps for short ones)
#   scripts/cpu-peer.sh recipe [rounds] [configs]  time to accuracy: `trainer run` of configs/mnist_fast.yaml
#                                                  and configs/mnist_cnn.yaml (or the comma-separated
#                                                  names given) beside the same recipes in PyTorch
#                                                  (scripts/torch_recipe.py), alternating, one table
#                                                  of test top-1 and wall seconds (THREADS=n: both on n)
#   scripts/cpu-peer.sh core                       only the peer's set-up (the lines above)
#   scripts/cpu-peer.sh NET BATCH SIZE [steps]     one net's peer (any registered net)
#   scripts/cpu-peer.sh [batch] [steps]            MNIST-CNN (default batch 128, 20 steps)
#   scripts/cpu-peer.sh all [steps]                MNIST-CNN b128, ResNet-34 b32@32, ResNet-50 b8@64
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
blas_link=/etc/alternatives/libblas.so.3-x86_64-linux-gnu
need=()
"$py" -c 'import torch, torchvision' 2>/dev/null || need+=(python3-torch python3-torchvision)
dpkg -s libopenblas0-pthread >/dev/null 2>&1 || need+=(libopenblas0-pthread)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing Debian's ${need[*]} (needs root)..." >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
blas=$(readlink -f "$blas_link" 2>/dev/null || echo "unknown")
case "$blas" in
  *openblas*) ;;
  *) echo "warning: libblas.so.3 is $blas, not OpenBLAS: PyTorch's products will be slow" \
       "(update-alternatives --set libblas.so.3-x86_64-linux-gnu /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3)" >&2 ;;
esac

# cpu_line prints the CPU's model, family/model and vector extensions.
cpu_line() {
  local model fam mod ext=""
  model=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
  fam=$(grep -m1 '^cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')
  mod=$(grep -m1 '^model[[:space:]]*:' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')
  for f in avx2 fma avx512f avx512bw avx512vl avx512_bf16 avx512_vnni amx_tile; do
    grep -m1 -qw "$f" /proc/cpuinfo && ext="$ext $f"
  done
  echo "$model (family $fam model $mod), $(nproc) cores:$ext"
}
# core_run CORETYPE prints "CORE GFLOPS JSON" for torch's 1024^3 matmul under that core ('' = OpenBLAS's own pick).
core_run() {
  local out core json
  out=$(cd /tmp && OPENBLAS_CORETYPE="$1" OPENBLAS_VERBOSE=2 OPENBLAS_NUM_THREADS=1 "$py" "$here/openblas_core.py" 2>&1)
  core=$(sed -n 's/.*Core: *\([A-Za-z0-9]*\).*/\1/p' <<<"$out" | tail -1)
  json=$(grep '^{' <<<"$out" | tail -1)
  echo "${core:-unknown} $("$py" -c 'import json,sys; print(json.loads(sys.argv[1])["gflop_per_s"])' "$json") $json"
}
echo "CPU: $(cpu_line)" >&2
# PyTorch's OpenMP threads spin while they wait for each other: on a machine busy with other work a
# descheduled thread stalls the rest (MNIST-fast's step 531 ms instead of 61 at a load average of 7).
# Sleeping waits cost a little on an idle machine and save the peer on a busy one, so they are chosen
# when the load average is at or above the core count, unless OMP_WAIT_POLICY is set.
load1=$(cut -d' ' -f1 /proc/loadavg)
if [ -n "${OMP_WAIT_POLICY:-}" ]; then
  echo "OMP_WAIT_POLICY=$OMP_WAIT_POLICY set by the environment: kept (load average $load1)" >&2
elif awk -v l="$load1" -v c="$(nproc)" 'BEGIN {exit !(l >= c)}'; then
  export OMP_WAIT_POLICY=PASSIVE
  echo "load average $load1 >= $(nproc) cores: OMP_WAIT_POLICY=PASSIVE (the peer's threads sleep while they wait)" >&2
else
  echo "load average $load1: OpenMP's default waits" >&2
fi
echo "BLAS: $blas" >&2
[ -n "${OPENBLAS_L2_SIZE:-}" ] && echo "OPENBLAS_L2_SIZE=$OPENBLAS_L2_SIZE set by the environment: kept (OpenBLAS's blocking for that L2)" >&2
case "$blas" in
  *openblas*)
    if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
      read -r core gf json <<<"$(core_run "$OPENBLAS_CORETYPE")"
      echo "OpenBLAS core: $core (OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE set by the environment: kept), 1024^3 matmul on 1 thread $gf GFLOP/s" >&2
    else
      cands=("")
      grep -m1 -qw avx512f /proc/cpuinfo && cands+=(SKYLAKEX)
      grep -m1 -qw avx2 /proc/cpuinfo && cands+=(HASWELL)
      grep -m1 -q AuthenticAMD /proc/cpuinfo && grep -m1 -qw avx2 /proc/cpuinfo && cands+=(ZEN)
      declare -A runs=() names=()
      for ((r = 0; r < ${CORE_ROUNDS:-3}; r++)); do
        for c in "${cands[@]}"; do
          read -r core gf json <<<"$(core_run "$c")"
          runs[${c:-auto}]+=" $gf"; names[${c:-auto}]=$core
        done
      done
      best="" bestgf=0 report=""
      for c in "${cands[@]}"; do
        k=${c:-auto}
        med=$(tr " " "\n" <<<"${runs[$k]}" | grep . | sort -g | tail -1)
        how="OpenBLAS's own pick"
        [ -n "$c" ] && how="OPENBLAS_CORETYPE=$c"
        report="$report ${names[$k]} ($how) $med [${runs[$k]# }];"
        if awk -v a="$med" -v b="$bestgf" 'BEGIN {exit !(a > b)}'; then best=$c bestgf=$med; fi
      done
      auto=${names[auto]}
      case "$auto" in
        Haswell|Zen|SkylakeX|Cooperlake|SapphireRapids) ;;
        *) echo "warning: OpenBLAS fell back to its $auto kernels on this CPU" >&2 ;;
      esac
      echo "1024^3 matmul on 1 thread, GFLOP/s, best of the rounds [each round]:$report" >&2
      core=${names[auto]} how="OpenBLAS's own pick"
      if [ -n "$best" ]; then
        export OPENBLAS_CORETYPE=$best
        core=${names[$best]} how="OPENBLAS_CORETYPE=$best"
      fi
      echo "OpenBLAS core: $core ($how, the fastest of the above)" >&2
    fi
    export CPU_PEER_BLAS_CORE=$core
    ;;
esac
"$py" -c 'import os, re, torch
torch.set_num_threads(os.cpu_count())
v = re.search(r"MKL-DNN v([0-9.]+)", torch.__config__.show())
print("PyTorch %s: %d threads; oneDNN (MKL-DNN %s) for convolutions: %s" % (torch.__version__, torch.get_num_threads(),
      v.group(1) if v else "absent", "yes" if torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled else "no"))' >&2
# ours sets trainer: $TRAINER, or this checkout built into a temporary folder.
ours() {
  trainer=${TRAINER:-}
  if [ -z "$trainer" ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    (cd "$here/.." && GOMLX_NO_AUTO_INSTALL=1 go build -o "$tmp/trainer" ./cmd/trainer)
    trainer=$tmp/trainer
  fi
}

case "${1:-}" in
  core) ;;
  table)
    ours
    GOMLX_NO_AUTO_INSTALL=1 "$py" "$here/cpu_peer_table.py" "$trainer" --rounds "${2:-3}" --steps "${3:-10}" --threads "${4:-0}" ${NETS:+--nets "$NETS"}
    ;;
  recipe)
    ours
    "$py" "$here/recipe_peer.py" "$trainer" --rounds "${2:-3}" ${3:+--configs "$3"} --threads "${THREADS:-0}"
    ;;
  resnet*) exec "$py" "$here/torch_resnet_step.py" "$1" "$2" "$3" "${4:-10}" ;;
  all)
    steps=${2:-10}
    "$py" "$here/torch_mnist_cnn_step.py" 128 "$steps"
    "$py" "$here/torch_resnet_step.py" resnet34 32 32 "$steps"
    "$py" "$here/torch_resnet_step.py" resnet50 8 64 "$steps"
    ;;
  [a-z]*) exec "$py" "$here/torch_step.py" "$1" "$2" "$3" "${4:-10}" ;;
  *) exec "$py" "$here/torch_mnist_cnn_step.py" "${1:-128}" "${2:-20}" ;;
esac
