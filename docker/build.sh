#!/usr/bin/env bash
# Builds the trainer as the images ship it: cgo on (the XLA backend) and -tags libjpeg (libjpeg-turbo
# decodes JPEGs), after installing what that needs on Debian/Ubuntu when it is missing (gcc, the
# libjpeg-turbo headers). Both Dockerfiles run it; .ci/run runs it (through docker/check.sh) on the CI
# machine directly, so the image's build step is a tested one.
#
#     docker/build.sh OUT    # writes the binary OUT and checks how it was built
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: docker/build.sh OUT}

fail() {
	echo "docker/build.sh: $*" >&2
	exit 1
}

# Installs the build deps that are missing with apt-get, as root or through sudo. libjpeg-turbo's
# headers are libjpeg62-turbo-dev on Debian and libjpeg-turbo8-dev on Ubuntu.
install_missing() {
	local missing=()
	command -v gcc >/dev/null || missing+=(gcc libc6-dev)
	local jpeg=no
	for dir in /usr/include /usr/include/*-linux-gnu; do
		[ -f "$dir/jpeglib.h" ] && jpeg=yes
	done
	[ ${#missing[@]} -eq 0 ] && [ $jpeg = yes ] && return 0
	command -v apt-get >/dev/null || fail "missing gcc or libjpeg-turbo's headers, and no apt-get to install them"
	local sudo=()
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null || fail "missing build deps; installing them needs root or sudo"
		sudo=(sudo)
	fi
	local apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600)
	"${apt[@]}" update -qq || fail "apt-get update failed"
	if [ $jpeg = no ]; then
		if apt-cache show libjpeg62-turbo-dev >/dev/null 2>&1; then
			missing+=(libjpeg62-turbo-dev)
		else
			missing+=(libjpeg-turbo8-dev)
		fi
	fi
	echo "docker/build.sh: installing ${missing[*]}" >&2
	"${apt[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || fail "apt-get could not install ${missing[*]}"
}

# jpeglib.h must be libjpeg-turbo >= 1.5: data/jpeg_turbo.go checks the version when it compiles.
install_missing

export CGO_ENABLED=1 GOMLX_NO_AUTO_INSTALL=1
go build -trimpath -tags libjpeg -o "$out" ./cmd/trainer

# The binary must say it was built as intended: a build without cgo silently loses the XLA backend and
# libjpeg-turbo.
settings=$(go version -m "$out")
grep -q -- '-tags=libjpeg' <<<"$settings" || fail "$out was not built with -tags libjpeg"
grep -q 'CGO_ENABLED=1' <<<"$settings" || fail "$out was built without cgo"
echo "docker/build.sh: built $out (cgo, -tags libjpeg)"
