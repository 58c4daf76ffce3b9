#!/usr/bin/env bash
# Runs the PyTorch-CPU peers of `trainer bench` on this machine, so our ms/step can be put beside them
# (docs/benchmarks.md). Installs Debian's python3-torch (and torchvision) when missing.
# Usage:
#   scripts/cpu-peer.sh [batch] [steps]            MNIST-CNN (default batch 128, 20 steps)
#   scripts/cpu-peer.sh resnet34|resnet50 BATCH SIZE [steps]
#   scripts/cpu-peer.sh all [steps]                the three configurations of issue 10
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=python3
python3 -c 'import torch, torchvision' 2>/dev/null || py=/usr/bin/python3
if ! "$py" -c 'import torch, torchvision' 2>/dev/null; then
  echo "installing Debian's python3-torch and python3-torchvision (needs root)..." >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch python3-torchvision >/dev/null
  py=/usr/bin/python3
fi
case "${1:-}" in
  resnet*) exec "$py" "$here/torch_resnet_step.py" "$1" "$2" "$3" "${4:-10}" ;;
  all)
    steps=${2:-10}
    "$py" "$here/torch_mnist_cnn_step.py" 128 "$steps"
    "$py" "$here/torch_resnet_step.py" resnet34 32 32 "$steps"
    "$py" "$here/torch_resnet_step.py" resnet50 8 64 "$steps"
    ;;
  *) exec "$py" "$here/torch_mnist_cnn_step.py" "${1:-128}" "${2:-20}" ;;
esac
