#!/usr/bin/env bash
# run.sh [test|record]: boots each pinned Debian kernel (assets.sh) under
# qemu with a pure cgroup v2 hierarchy (cgroup_no_v1=all) and runs, inside,
# the collector packages' real-cgroup tests, a real ansible-runner job under
# `peakline collect` and one under `peakline agent` (e2e/'s
# end-to-end tests), and records real v2 job cgroups (record.sh). For
# make test-v2; needs root, qemu-system-x86, busybox-static, cpio,
# debootstrap and xz-utils (.ci/run installs them).
#
#   test    (default) fails unless every check passed on every kernel.
#   record  does the same, then copies the 6.12 recording into
#           collector/discover/testdata/v2-real.
#
# Kernels, the guest root file system and the test binaries live in
# $V2VM_CACHE (default bin/v2vm): kept between runs, keyed by the pinned
# versions. The guest's output and each check's full output land in
# $V2VM_CACHE/run-<kernel>/.
#
# no_timer_check: on a loaded host the emulated timer can miss the
# kernel's boot-time IO-APIC check, which then panics ("IO-APIC + timer
# doesn't work!"; seen with 6.12 at a load average of 10 on 2 cores).
#
# Emulation only (TCG): KVM fails on these hosts ("failed to set MSR
# 0x10a"; an emulation failure and a hang otherwise). Emulation makes
# everything 2-20x slower, so the tests' fixed deadlines are scaled by
# PEAKLINE_TEST_TIME_SCALE (V2VM_TIME_SCALE, default 5).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
mode=${1:-test}
CACHE=${V2VM_CACHE:-$REPO/bin/v2vm}
SCALE=${V2VM_TIME_SCALE:-5}
VM_TIMEOUT=${V2VM_TIMEOUT:-900} # seconds per boot, whatever the guest does
GO=${GO:-go}
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)
# shellcheck source=scripts/v2vm/assets.sh
. "$HERE/assets.sh"

((EUID == 0)) || die "needs root (debootstrap, and qemu's 9p share must write as root)"
for tool in qemu-system-x86_64 busybox cpio debootstrap xz dpkg-deb apt-get mke2fs timeout; do
	command -v "$tool" >/dev/null || die "$tool not found (apt-get install qemu-system-x86 busybox-static cpio debootstrap xz-utils)"
done
[[ -x /bin/busybox ]] && file_is_static=$(ldd /bin/busybox 2>&1 || true)
[[ ${file_is_static:-} == *"not a dynamic"* ]] || die "/bin/busybox is not static: apt-get install busybox-static"

t_start=$(date +%s)
rootimg=$(build_rootfs)

# The binaries the guest runs: static (no cgo), built on the host.
bindir=$CACHE/bin
mkdir -p "$bindir"
echo "v2vm: building the test binaries" >&2
t_build=$(date +%s)
(
	cd "$REPO"
	export CGO_ENABLED=0
	$GO build -o "$bindir/peakline" .
	for p in cgroup live discover; do
		$GO test -c -o "$bindir/$p.test" "./collector/$p"
	done
	$GO test -c -o "$bindir/e2e.test" ./e2e
)
echo "v2vm: root image and binaries ready in $(($(date +%s) - t_start))s (build $(($(date +%s) - t_build))s)" >&2

# The checks, one a line: kernels (a glob of the release)|name|dir in
# the source tree|tests that must pass|command. Every kernel runs the
# collector packages' real-cgroup tests; 6.1 runs an ansible-runner job
# under `peakline collect` (e2e's TestCollectAnsibleRunner),
# 6.12 one under `peakline agent` in a podman-like container cgroup with the
# AWX stand-in (TestAgentAWXOutage). An emulated ansible-runner job takes
# minutes: more of them would not fit CI's time (collector/live's own
# ansible-runner test repeats the first, under the same collector code).
cat >"$bindir/checks" <<'EOF'
*|cgroup-tests|/mnt/src/collector/cgroup|TestRealHost|/mnt/share/cgroup.test -test.v -test.count=1 -test.timeout=10m
*|discover-tests|/mnt/src/collector/discover|TestRealV2 TestRealProcessTree TestRealProcessTreeChainExit|/mnt/share/discover.test -test.v -test.count=1 -test.timeout=10m -test.run ^TestReal
*|live-tests|/mnt/src/collector/live|TestCollectRealCommand TestCollectAttach TestStaleCgroup|/mnt/share/live.test -test.v -test.count=1 -test.timeout=10m -test.run ^(TestCollectRealCommand|TestCollectAttach|TestStaleCgroup)$
6.1.*|collect-ansible-runner|/mnt/src/e2e|TestCollectAnsibleRunner|/mnt/share/e2e.test -test.v -test.count=1 -test.timeout=10m -test.run ^TestCollectAnsibleRunner$
6.12.*|agent-ansible-runner|/mnt/src/e2e|TestAgentAWXOutage|/mnt/share/e2e.test -test.v -test.count=1 -test.timeout=10m -test.run ^TestAgentAWXOutage$
EOF

overall=0
summary=()
for pin in "${KERNELS[@]}"; do
	kdir=$(fetch_kernel "$pin")
	pkg=${pin%%=*}
	krel=${pkg#linux-image-}
	run=$CACHE/run-$krel
	rm -rf "$run"
	mkdir -p "$run"
	cp "$bindir"/{peakline,cgroup.test,live.test,discover.test,e2e.test} "$run/"
	while IFS='|' read -r glob line; do
		# shellcheck disable=SC2053
		if [[ $krel == $glob ]]; then echo "$line"; fi
	done <"$bindir/checks" >"$run/checks"
	cp "$HERE/guest.sh" "$HERE/record.sh" "$run/"
	printf 'export PEAKLINE_TEST_TIME_SCALE=%s PEAKLINE_TEST_BIN=/mnt/share/peakline\n' "$SCALE" >"$run/env"
	build_initramfs "$kdir" "$CACHE/initrd-$krel.gz"
	echo "v2vm: booting $krel (log: $run/console.log)" >&2
	t0=$(date +%s)
	rc=0
	timeout --kill-after=10 "$VM_TIMEOUT" qemu-system-x86_64 \
		-accel tcg,thread=multi -cpu max -smp 2 -m 3072 \
		-kernel "$kdir/boot/vmlinuz-$krel" -initrd "$CACHE/initrd-$krel.gz" \
		-append "console=ttyS0 cgroup_no_v1=all no_timer_check quiet panic=-1" \
		-drive "file=$rootimg,format=raw,if=virtio,snapshot=on" \
		-virtfs "local,path=$run,mount_tag=share,security_model=none" \
		-virtfs "local,path=$REPO,mount_tag=src,security_model=none,readonly=on" \
		-nographic -no-reboot -nic none >"$run/console.log" 2>&1 || rc=$?
	secs=$(($(date +%s) - t0))
	grep -E '^(v2vm|===|  [a-z-]+[:|] |none |cgroup)' "$run/console.log" || true
	if ((rc != 0)); then
		echo "v2vm: $krel: qemu exited $rc after ${secs}s (124: the ${VM_TIMEOUT}s timeout)" >&2
		tail -n 30 "$run/console.log" >&2
	fi
	if [[ ! -s $run/exit ]]; then
		echo "v2vm: $krel: the guest wrote no exit file: it did not finish (see $run/console.log)" >&2
		status=missing
		overall=1
	elif [[ $(cat "$run/exit") != 0 ]]; then
		status=failed
		overall=1
	else
		status=ok
	fi
	summary+=("$krel: $status in ${secs}s")
done

for s in "${summary[@]}"; do
	echo "v2vm: $s"
done
echo "v2vm: total $(($(date +%s) - t_start))s"
((overall == 0)) || die "a check failed in the guest"

if [[ $mode == record ]]; then
	src=$(echo "$CACHE"/run-6.12.*/record)
	dst=$REPO/collector/discover/testdata/v2-real
	[[ -d $src ]] || die "no recording in $src"
	rm -rf "$dst"
	cp -r "$src" "$dst"
	echo "v2vm: recorded tree of kernel $(cat "$dst/kernel") in $dst"
fi
