#!/usr/bin/env bash
# Runs the PyTorch-CPU peer of the MNIST-CNN train step on this machine, so our ms/step can be put
# beside it (docs/benchmarks.md). Installs Debian's python3-torch when it is missing.
# Usage: scripts/cpu-peer.sh [batch] [steps]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if ! python3 -c 'import torch' 2>/dev/null && ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "installing Debian's python3-torch (needs root)..." >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch >/dev/null
fi
py=python3
python3 -c 'import torch' 2>/dev/null || py=/usr/bin/python3
exec "$py" "$here/torch_mnist_cnn_step.py" "${1:-128}" "${2:-20}"
