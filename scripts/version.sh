#!/bin/sh
# Prints the release version of the checkout from git describe: the tag
# without its "v" (1.2.0), with the commits since and the commit
# (1.2.0-3-g4ea68d0) and "-dirty" for uncommitted changes. Before the
# first v* tag: 0.0.0-<commit>[-dirty], a semver pre-release that every
# tagged release sorts after.
set -eu
d=$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null) && { echo "${d#v}"; exit 0; }
d=$(git describe --always --dirty --abbrev=7 2>/dev/null) && { echo "0.0.0-g$d"; exit 0; }
echo 0.0.0-unknown
