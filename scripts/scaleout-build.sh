#!/usr/bin/env bash
# scaleout-build.sh DIR [NAME...]: builds Grafana Mimir and Thanos (or the
# NAMEs given: mimir, thanos) into DIR from the Go module proxy, for make
# test-scaleout.
#
# Neither installs with `go install module@version`: their go.mod files have
# replace directives (Mimir's Prometheus fork, Thanos' forks), which go install
# refuses. So the module is downloaded, copied to a writable tree (the module
# cache is read-only and the build writes go.sum entries) and built inside
# it, where its replace directives apply. Thanos needs the build tags its own
# Makefile uses (netgo, slicelabels: its label code is written for the slice
# layout of Prometheus labels). Each build runs at the lowest CPU priority
# (minutes on an idle 2-core machine; 68 and 44 minutes beside other work);
# a binary already in DIR at the same version is kept.
#
# Mimir tags its releases mimir-X.Y.Z, which are not Go module versions, so
# the proxy serves commits of main as pseudo-versions; Thanos tags semver.
set -euo pipefail

dir=${1:?usage: scaleout-build.sh DIR}
MIMIR_VERSION=${MIMIR_VERSION:-v1.3.1-0.20260423142704-aced80d74930}
THANOS_VERSION=${THANOS_VERSION:-v0.42.4}
GO=${GO:-go}
mkdir -p "$dir/src"
dir=$(cd "$dir" && pwd)

# build NAME MODULE VERSION PKG [TAGS]
build() {
	local name=$1 mod=$2 ver=$3 pkg=$4 tags=${5:-}
	if [ -x "$dir/$name" ] && [ "$(cat "$dir/$name.version" 2>/dev/null)" = "$ver" ]; then
		echo "scaleout-build: $name $ver already in $dir"
		return
	fi
	local src
	src=$($GO mod download -json "$mod@$ver" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	if [ -z "$src" ]; then
		echo "scaleout-build: download $mod@$ver: no module directory" >&2
		exit 1
	fi
	local work="$dir/src/$name-$ver"
	if [ ! -d "$work" ]; then
		rm -rf "$work.tmp"
		cp -r "$src" "$work.tmp"
		chmod -R u+w "$work.tmp"
		mv "$work.tmp" "$work"
	fi
	echo "scaleout-build: building $name $ver (a few minutes)"
	(cd "$work" && GOFLAGS=-mod=mod nice -n 19 $GO build ${tags:+-tags "$tags"} -o "$dir/$name" "$pkg")
	echo "$ver" >"$dir/$name.version"
}

shift
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
	names=(mimir thanos)
fi
for name in "${names[@]}"; do
	case $name in
	mimir) build mimir github.com/grafana/mimir "$MIMIR_VERSION" ./cmd/mimir ;;
	thanos) build thanos github.com/thanos-io/thanos "$THANOS_VERSION" ./cmd/thanos netgo,slicelabels ;;
	*)
		echo "scaleout-build: unknown name $name (mimir, thanos)" >&2
		exit 2
		;;
	esac
done
