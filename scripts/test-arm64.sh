#!/usr/bin/env bash
# The arm64 build's tests under user-mode emulation: gobackend and gobackend/kernels (the NEON GEMM
# kernels and everything that runs through them), cross-compiled with GOARCH=arm64 and run by
# qemu-aarch64-static, which this script installs with apt-get (Debian's qemu-user-static) when it is
# missing. Emulated speed says nothing about real arm64 CPUs; this checks correctness only. .ci/run
# runs it after `go test ./...`.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOMLX_NO_AUTO_INSTALL=1
unset TRAINER_GEMM_KERNEL # The tests must run the NEON kernels, not the portable one.

fail() {
	echo "test-arm64.sh: $*" >&2
	exit 1
}

if ! command -v qemu-aarch64-static >/dev/null; then
	command -v apt-get >/dev/null ||
		fail "qemu-aarch64-static is missing and there is no apt-get to install it (Debian/Ubuntu: apt-get install qemu-user-static)"
	sudo=()
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null || fail "qemu-aarch64-static is missing; installing it needs root or sudo (apt-get install qemu-user-static)"
		sudo=(sudo)
	fi
	apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600)
	echo "test-arm64.sh: installing qemu-user-static" >&2
	# A fresh machine may have no package lists yet: update and retry once.
	"${apt[@]}" install -y -qq qemu-user-static >/dev/null ||
		{ "${apt[@]}" update -qq && "${apt[@]}" install -y -qq qemu-user-static >/dev/null; } ||
		fail "apt-get could not install qemu-user-static"
	command -v qemu-aarch64-static >/dev/null || fail "qemu-user-static is installed but qemu-aarch64-static is not on PATH"
fi

export CGO_ENABLED=0 GOARCH=arm64
go vet ./gobackend/... # asmdecl: the assembly's frame offsets against the Go declarations.
go test -exec qemu-aarch64-static ./gobackend/...
