#!/bin/sh
# The images' entrypoint: puts the CUDA libraries of the plugin's virtual environment (NVIDIA's wheels,
# nvidia/*/lib) on the loader path, as docs/distributed.md says JAX's Python does before it loads the
# plugin, names that environment so the trainer's plugin search finds jax_plugins/xla_cuda13 in it, then
# runs the trainer with the arguments given. Without the environment (the CPU image) it only runs the
# trainer.
set -eu
venv=${PJRT_VENV:-/opt/pjrt}
if [ -d "$venv" ]; then
	for lib in "$venv"/lib/python3*/site-packages/nvidia/*/lib; do
		[ -d "$lib" ] && LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$lib"
	done
	export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" VIRTUAL_ENV="$venv"
fi
exec "${TRAINER:-/usr/local/bin/trainer}" "$@"
