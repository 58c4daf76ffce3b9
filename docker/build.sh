#!/usr/bin/env bash
# Builds the trainer as the images ship it: cgo on (the XLA backend), after installing gcc with apt-get
# on Debian/Ubuntu when it is missing. JPEGs decode with libjpeg-turbo's TurboJPEG library, loaded at
# run time (the images carry libjpeg-turbo 3's, built by scripts/build-turbojpeg3.sh; no header or build tag is needed). Both Dockerfiles run
# it; .ci/run runs it (through docker/check.sh) on the CI machine directly, so the image's build step is
# a tested one.
#
#     docker/build.sh OUT    # writes the binary OUT and checks how it was built
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: docker/build.sh OUT}

fail() {
	echo "docker/build.sh: $*" >&2
	exit 1
}

# Installs the build deps that are missing with apt-get, as root or through sudo.
install_missing() {
	local missing=()
	command -v gcc >/dev/null || missing+=(gcc libc6-dev)
	[ ${#missing[@]} -eq 0 ] && return 0
	command -v apt-get >/dev/null || fail "missing gcc, and no apt-get to install it"
	local sudo=()
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null || fail "missing build deps; installing them needs root or sudo"
		sudo=(sudo)
	fi
	local apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600)
	"${apt[@]}" update -qq || fail "apt-get update failed"
	echo "docker/build.sh: installing ${missing[*]}" >&2
	"${apt[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || fail "apt-get could not install ${missing[*]}"
}

install_missing

export CGO_ENABLED=1 GOMLX_NO_AUTO_INSTALL=1
go build -trimpath -o "$out" ./cmd/trainer

# The binary must say it was built as intended: a build without cgo silently loses the XLA backend.
settings=$(go version -m "$out")
grep -q 'CGO_ENABLED=1' <<<"$settings" || fail "$out was built without cgo"
echo "docker/build.sh: built $out (cgo)"
