#!/bin/bash
# guest.sh: runs as root in the v2vm guest's Debian root (chrooted by
# scripts/v2vm/init). It mounts a pure cgroup v2 hierarchy, runs the checks
# named in /mnt/share/checks against the binaries in /mnt/share (one of
# them records real v2 cgroup layouts into /mnt/share/record) and writes
# the overall exit status to /mnt/share/exit last: the host fails on a
# missing or non-zero exit file.
set -u
S=/mnt/share
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs -o size=1200m tmpfs /tmp
mount -t cgroup2 none /sys/fs/cgroup
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TMPDIR=/tmp LC_ALL=C.UTF-8
# shellcheck source=/dev/null
. "$S/env" # PEAKLINE_TEST_TIME_SCALE, PEAKLINE_TEST_BIN

echo "v2vm: uname -r: $(uname -r)"
echo "v2vm: /proc/self/cgroup: $(cat /proc/self/cgroup)"
echo "v2vm: grep cgroup /proc/mounts:"
grep cgroup /proc/mounts
echo "v2vm: root cgroup.controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"

fail=0
# check NAME DIR PASS-PATTERN COMMAND...: runs COMMAND in DIR, its output
# in $S/NAME.out; it passes when it exits 0 and, for a go test binary, each
# test named in PASS-PATTERN (space separated, may be empty) shows
# "--- PASS: NAME" (a skip fails it).
check() {
	local name=$1 dir=$2 want=$3 t0 rc
	shift 3
	echo "=== check $name"
	t0=$(date +%s)
	(cd "$dir" && "$@") >"$S/$name.out" 2>&1
	rc=$?
	for t in $want; do
		if ! grep -q -- "^--- PASS: $t " "$S/$name.out" && ! grep -q -- "^    --- PASS: $t " "$S/$name.out"; then
			echo "v2vm: $name: $t did not pass"
			((rc == 0)) && rc=1
		fi
	done
	grep -E -- '^(--- |    --- )(PASS|FAIL|SKIP)|^(ok|FAIL|PASS)$' "$S/$name.out" | sed "s/^/  $name: /"
	if ((rc != 0)); then
		echo "v2vm: $name failed (exit $rc); its last lines:"
		tail -n 60 "$S/$name.out" | sed "s/^/  $name| /"
		fail=1
	fi
	echo "=== check $name: exit $rc in $(($(date +%s) - t0))s"
}

# Only cgroup2 is mounted, and this shell is in its root.
only_v2() {
	[ "$(grep -c cgroup /proc/mounts)" = 1 ] &&
		grep -q '^none /sys/fs/cgroup cgroup2 ' /proc/mounts &&
		[ "$(cat /proc/self/cgroup)" = "0::/" ]
}
check only-cgroup2 / "" only_v2

while IFS='|' read -r name dir want cmd; do
	[ -z "$name" ] && continue
	# shellcheck disable=SC2086
	check "$name" "$dir" "$want" $cmd
done <"$S/checks"


echo "$fail" >"$S/exit"
sync
