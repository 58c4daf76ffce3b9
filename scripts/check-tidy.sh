#!/usr/bin/env bash
# Fails when `go mod tidy` would change go.mod or go.sum: every requirement is needed and marked
# direct or indirect as the code uses it. The tree is left as it was found, whatever the outcome.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOMLX_NO_AUTO_INSTALL=1

saved=$(mktemp -d)
trap 'cp "$saved/go.mod" go.mod; cp "$saved/go.sum" go.sum; rm -rf "$saved"' EXIT
cp go.mod go.sum "$saved/"

go mod tidy
if ! diff -u "$saved/go.mod" go.mod || ! diff -u "$saved/go.sum" go.sum; then
	echo "check-tidy.sh: go mod tidy changes go.mod/go.sum (diff above): run it and commit the result" >&2
	exit 1
fi
echo "check-tidy.sh: go.mod and go.sum are tidy"
