#!/usr/bin/env bash
# Runs the PyTorch-CPU peers of `trainer bench` on this machine, so our ms/step can be put beside them
# (docs/benchmarks.md). Installs Debian's python3-torch, python3-torchvision and libopenblas0-pthread
# when missing (Debian's torch takes its matrix products from whatever libblas.so.3 is installed; the
# reference BLAS a fresh machine has makes every Linear 3-7x slower than a user's PyTorch), and prints
# which BLAS is active.
# Usage:
#   scripts/cpu-peer.sh table [rounds] [steps] [threads]
#                                                  every registered net, ours and PyTorch alternating,
#                                                  one ratio table (TRAINER=path: our binary, else built;
#                                                  threads: both on that many, default every core)
#   scripts/cpu-peer.sh NET BATCH SIZE [steps]     one net's peer (any registered net)
#   scripts/cpu-peer.sh [batch] [steps]            MNIST-CNN (default batch 128, 20 steps)
#   scripts/cpu-peer.sh all [steps]                the three configurations of issue 10
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
echo "BLAS: $blas; torch threads: $("$py" -c 'import os, torch; torch.set_num_threads(os.cpu_count()); print(torch.get_num_threads())')" >&2
case "${1:-}" in
  table)
    trainer=${TRAINER:-}
    if [ -z "$trainer" ]; then
      tmp=$(mktemp -d)
      trap 'rm -rf "$tmp"' EXIT
      (cd "$here/.." && GOMLX_NO_AUTO_INSTALL=1 go build -o "$tmp/trainer" ./cmd/trainer)
      trainer=$tmp/trainer
    fi
    GOMLX_NO_AUTO_INSTALL=1 "$py" "$here/cpu_peer_table.py" "$trainer" --rounds "${2:-3}" --steps "${3:-10}" --threads "${4:-0}"
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
