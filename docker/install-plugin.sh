#!/usr/bin/env bash
# Installs the PJRT CUDA plugin the CUDA image runs on: JAX's jax-cuda13-pjrt wheel (the plugin,
# jax_plugins/xla_cuda13/xla_cuda_plugin.so) and, through jax-cuda13-plugin's with-cuda extra, NVIDIA's
# CUDA library wheels, into a Python virtual environment at PREFIX (default /opt/pjrt), the layout
# docker/entrypoint.sh and the trainer's plugin search expect. The version is the one checked on an H200
# (docs/benchmarks.md). Needs python3 with venv and pip, and the network.
#
#     docker/install-plugin.sh [PREFIX]
set -euo pipefail
prefix=${1:-/opt/pjrt}
version=${JAX_CUDA_VERSION:-0.11.2}
python3 -m venv "$prefix"
"$prefix/bin/pip" install --no-cache-dir --quiet "jax-cuda13-pjrt==$version" "jax-cuda13-plugin[with-cuda]==$version"
plugin=$(ls "$prefix"/lib/python3*/site-packages/jax_plugins/xla_cuda13/xla_cuda_plugin.so)
echo "docker/install-plugin.sh: $plugin"
