#!/usr/bin/env bash
# Builds libjpeg-turbo 3's TurboJPEG library (libturbojpeg.so) from the source tarball in the Debian
# archive, for testing the TurboJPEG 3 decoding path (partial decoding) on a system whose own
# libturbojpeg is 2.x (Debian 12). Prints the library's path; run the tests with it:
#
#   TRAINER_TURBOJPEG=$(scripts/build-turbojpeg3.sh) go test ./data/
#
# Needs curl, cmake, nasm and a C compiler (apt-get install cmake nasm). The build is cached under
# $TURBOJPEG3_CACHE (default ~/.cache/trainer/turbojpeg3): a second run only prints the path.
set -euo pipefail
version=3.1.3
# SHA-256 of libjpeg-turbo_3.1.3.orig.tar.gz in Debian's pool (the upstream release tarball).
sha256=3a13a5ba767dc8264bc40b185e41368a80d5d5f945944d1dbaa4b2fb0099f4e5
url=http://deb.debian.org/debian/pool/main/libj/libjpeg-turbo/libjpeg-turbo_${version}.orig.tar.gz
cache=${TURBOJPEG3_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/trainer/turbojpeg3}
lib=$cache/$version/lib/libturbojpeg.so
if [ -f "$lib" ]; then
	echo "$lib"
	exit 0
fi
for tool in curl cmake nasm cc; do
	command -v "$tool" >/dev/null || { echo "build-turbojpeg3.sh: $tool is missing (apt-get install curl cmake nasm gcc)" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
curl -fsSL --retry 3 -o "$work/src.tar.gz" "$url"
echo "$sha256  $work/src.tar.gz" | sha256sum -c --quiet - || { echo "build-turbojpeg3.sh: $url has the wrong SHA-256" >&2; exit 1; }
tar -xzf "$work/src.tar.gz" -C "$work"
# Only the shared TurboJPEG library: no static libraries, tools, Java or tests.
cmake -S "$work/libjpeg-turbo-$version" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DENABLE_STATIC=OFF \
	-DWITH_TURBOJPEG=ON -DWITH_JAVA=OFF -DWITH_TOOLS=OFF -DWITH_TESTS=OFF >"$work/cmake.log" 2>&1 ||
	{ cat "$work/cmake.log" >&2; exit 1; }
cmake --build "$work/build" --target turbojpeg -j "$(nproc)" >"$work/build.log" 2>&1 || { tail -50 "$work/build.log" >&2; exit 1; }
# Into place with one rename, so a concurrent run sees the library whole or not at all.
mkdir -p "$cache/$version"
tmp=$(mktemp -d "$cache/$version/lib.XXXXXX")
chmod 755 "$tmp"
cp -L "$work/build/libturbojpeg.so.0" "$tmp/libturbojpeg.so"
mv -T "$tmp" "$cache/$version/lib" 2>/dev/null || rm -rf "$tmp" # another run was first
[ -f "$lib" ] || { echo "build-turbojpeg3.sh: $lib is missing after the build" >&2; exit 1; }
echo "$lib"
