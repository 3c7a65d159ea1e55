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
# V2VM_KERNELS and V2VM_CHECKS (extended regular expressions, matched
# against the kernel release and the check's name) narrow a run to some
# kernels and checks, for working on one of them; a narrowed run is not
# the target's verdict (run.sh says so at the end).
#
# Kernels, the guest root file system and the test binaries live in
# $V2VM_CACHE: kept between runs, keyed by the pinned versions. Its
# default is /var/cache/peakline-v2vm when that directory exists (a cache
# that outlives the checkout: CI's clean checkouts on one machine share
# it; .ci/run makes it), else bin/v2vm. The guest's output and each check's full output land in
# $V2VM_CACHE/run-<kernel>/.
#
# no_timer_check: on a loaded host the emulated timer can miss the
# kernel's boot-time IO-APIC check, which then panics ("IO-APIC + timer
# doesn't work!"; seen with 6.12 at a load average of 10 on 2 cores).
#
# Emulation only (TCG): KVM fails on these hosts ("failed to set MSR
# 0x10a"; an emulation failure and a hang otherwise). Emulation makes
# CPU work 20-70x slower (a 0.46 s shell loop of the host took 8-9 s in
# the guest, 35 s with the host at a load of 14), so the tests' fixed
# deadlines, burn times and poll intervals are scaled by
# PEAKLINE_TEST_TIME_SCALE (V2VM_TIME_SCALE, default 10: at 5 an emulated
# Ansible task's own start-up used as much CPU as the 10 s burn task the
# end-to-end tests tell apart from the others by its mean).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
mode=${1:-test}
SHARED_CACHE=/var/cache/peakline-v2vm
if [[ -z ${V2VM_CACHE:-} && -d $SHARED_CACHE ]]; then
	V2VM_CACHE=$SHARED_CACHE
fi
CACHE=${V2VM_CACHE:-$REPO/bin/v2vm}
SCALE=${V2VM_TIME_SCALE:-10}
VM_TIMEOUT=${V2VM_TIMEOUT:-2700} # seconds per boot, whatever the guest does
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
# collector packages' real-cgroup tests (TestCollectPressureReal: the
# stall samples against the kernel's pressure files). e2e's end-to-end
# tests, each a real ansible-runner job or several, are shared out
# between the kernels (an emulated job takes half a minute or more): 6.1
# runs a job under `peakline collect` (TestCollectAnsibleRunner), the
# contended-run test (TestPressureNoise: six jobs) and the agent's tests
# of AWX's job types, cgroup parents, tokens and privileges; 6.12 the
# agent's tests of finding jobs (podman-like and pod-like cgroups, the
# AWX stand-in), restarts, outages and the collection policy, and
# records the real v2 layouts that make record-v2 keeps. Every TestAgent
# end-to-end test of e2e/ runs on one of them.
cat >"$bindir/checks" <<'EOF'
*|cgroup-tests|/mnt/src/collector/cgroup|TestRealHost|/mnt/share/cgroup.test -test.v -test.count=1 -test.timeout=10m
*|discover-tests|/mnt/src/collector/discover|TestRealV2 TestRealProcessTree TestRealProcessTreeChainExit|/mnt/share/discover.test -test.v -test.count=1 -test.timeout=10m -test.run ^TestReal
*|live-tests|/mnt/src/collector/live|TestCollectRealCommand TestCollectAttach TestStaleCgroup TestCollectPressureReal|/mnt/share/live.test -test.v -test.count=1 -test.timeout=10m -test.run ^(TestCollectRealCommand|TestCollectAttach|TestStaleCgroup|TestCollectPressureReal)$
6.1.*|collect-ansible-runner|/mnt/src/e2e|TestCollectAnsibleRunner|/mnt/share/e2e.test -test.v -test.count=1 -test.timeout=10m -test.run ^TestCollectAnsibleRunner$
6.1.*|pressure-noise|/mnt/src/e2e|TestPressureNoise|/mnt/share/e2e.test -test.v -test.count=1 -test.timeout=30m -test.run ^TestPressureNoise$
6.1.*|agent-jobtypes|/mnt/src/e2e|TestAgentAdHocCommand TestAgentJobTypes TestAgentCustomParent TestAgentIngestOnlyToken TestAgentNoCapabilities TestAgentRightsize|/mnt/share/e2e.test -test.v -test.count=1 -test.timeout=30m -test.run ^TestAgent(AdHocCommand|JobTypes|CustomParent|IngestOnlyToken|NoCapabilities|Rightsize)$
6.12.*|agent-e2e|/mnt/src/e2e|TestAgentFindsAWXJobs TestAgentRestartMidJob TestAgentAWXOutage TestAgentServerOutage TestAgentObeysPolicy|/mnt/share/e2e.test -test.v -test.count=1 -test.timeout=30m -test.run ^TestAgent(FindsAWXJobs|RestartMidJob|AWXOutage|ServerOutage|ObeysPolicy)$
6.12.*|record|/||bash /mnt/share/record.sh /mnt/share/record
EOF

# boot KERNELDIR KREL RUNDIR: runs the guest of one kernel to its end;
# qemu's exit status and the seconds it ran go to RUNDIR/qemu. A guest
# whose kernel panicked before the guest script wrote its exit file is
# booted once more, its first log kept as RUNDIR/console-panic.log: in
# one run of many, Debian's 6.12 hit an int3 Oops in the scheduler
# (__set_next_task_fair, in live-tests, 32 s after boot), a breakpoint
# the kernel places while it patches its own code (a static key), likely
# run into by the other virtual CPU under multi-threaded emulation. A second
# panic fails the target like any missing exit file.
boot() {
	local kdir=$1 krel=$2 run=$3 t0 rc attempt
	t0=$(date +%s)
	for attempt in 1 2; do
		rc=0
		timeout --kill-after=10 "$VM_TIMEOUT" qemu-system-x86_64 \
			-accel tcg,thread=multi -cpu max -smp 2 -m 3072 \
			-kernel "$kdir/boot/vmlinuz-$krel" -initrd "$CACHE/initrd-$krel.gz" \
			-append "console=ttyS0 cgroup_no_v1=all no_timer_check quiet panic=-1" \
			-drive "file=$rootimg,format=raw,if=virtio,snapshot=on" \
			-virtfs "local,path=$run,mount_tag=share,security_model=none" \
			-virtfs "local,path=$REPO,mount_tag=src,security_model=none,readonly=on" \
			-nographic -no-reboot -nic none >"$run/console.log" 2>&1 || rc=$?
		if ((attempt == 1)) && [[ ! -s $run/exit ]] && grep -q 'Kernel panic' "$run/console.log"; then
			echo "v2vm: $krel: the guest's kernel panicked (log kept as $run/console-panic.log): booting it once more" >&2
			mv "$run/console.log" "$run/console-panic.log"
			rm -rf "$run"/*.out "$run/exit" "$run/record"
			continue
		fi
		break
	done
	echo "$rc $(($(date +%s) - t0))" >"$run/qemu"
}

# The kernels' guests run one after the other, each with the host's
# cores to itself (V2VM_PARALLEL=1: at once, for a host other work keeps
# busy, where two guests get about twice the CPU one gets). A guest
# cannot see the host's load: another guest's work would make its tasks
# slower with no stall of its own to tell, which the contended-run test
# would take for a regression.
krels=()
for pin in "${KERNELS[@]}"; do
	kdir=$(fetch_kernel "$pin")
	pkg=${pin%%=*}
	krel=${pkg#linux-image-}
	if [[ -n ${V2VM_KERNELS:-} && ! $krel =~ $V2VM_KERNELS ]]; then
		continue
	fi
	krels+=("$krel")
	run=$CACHE/run-$krel
	rm -rf "$run"
	mkdir -p "$run"
	cp "$bindir"/{peakline,cgroup.test,live.test,discover.test,e2e.test} "$run/"
	while IFS='|' read -r glob line; do
		# shellcheck disable=SC2053
		if [[ $krel == $glob && ${line%%|*} =~ ${V2VM_CHECKS:-.} ]]; then echo "$line"; fi
	done <"$bindir/checks" >"$run/checks"
	cp "$HERE/guest.sh" "$HERE/record.sh" "$HERE/shapes.py" "$run/"
	printf 'export PEAKLINE_TEST_TIME_SCALE=%s PEAKLINE_TEST_BIN=/mnt/share/peakline\n' "$SCALE" >"$run/env"
	build_initramfs "$kdir" "$CACHE/initrd-$krel.gz"
	echo "v2vm: booting $krel (log: $run/console.log)" >&2
	if [[ ${V2VM_PARALLEL:-0} == 0 ]]; then
		boot "$kdir" "$krel" "$run"
	else
		boot "$kdir" "$krel" "$run" &
	fi
done
wait

overall=0
summary=()
for krel in "${krels[@]}"; do
	run=$CACHE/run-$krel
	rc=1 secs=0
	[[ -s $run/qemu ]] && read -r rc secs <"$run/qemu"
	echo "v2vm: $krel:" >&2
	grep -E '^(v2vm|===|  [a-z-]+[:|] |none |cgroup)' "$run/console.log" || true
	if [[ -f $run/console-panic.log ]]; then
		echo "v2vm: $krel: booted twice: the first boot's kernel panicked ($run/console-panic.log)"
	fi
	if ((rc != 0)); then
		echo "v2vm: $krel: qemu exited $rc after ${secs}s (124: the ${VM_TIMEOUT}s timeout)" >&2
		tail -n 30 "$run/console.log" >&2
	fi
	if [[ ! -s $run/exit ]]; then
		echo "v2vm: $krel: the guest wrote no exit file: it did not finish (see $run/console.log)" >&2
		status=missing
		overall=1
	elif [[ $(cat "$run/exit") != 0 ]]; then
		# The checks that failed, by name, for the last lines of a log.
		status="failed: $(tr -d '\r' <"$run/console.log" | sed -n 's/^v2vm: \([a-z0-9-]*\) failed (exit.*/\1/p' | tr '\n' ' ')"
		status=${status% }
		overall=1
	else
		status=ok
	fi
	summary+=("$krel: $status, in ${secs}s")
done

for s in "${summary[@]}"; do
	echo "v2vm: $s"
done
echo "v2vm: total $(($(date +%s) - t_start))s"
if [[ -n ${V2VM_KERNELS:-}${V2VM_CHECKS:-} ]]; then
	echo "v2vm: narrowed by V2VM_KERNELS='${V2VM_KERNELS:-}' V2VM_CHECKS='${V2VM_CHECKS:-}': not a full run"
fi
((overall == 0)) || die "a check failed in the guest"

if [[ $mode == record ]]; then
	src=$(echo "$CACHE"/run-6.12.*/record)
	dst=$REPO/collector/discover/testdata/v2-real
	[[ -d $src ]] || die "no recording in $src"
	rm -rf "$dst"
	cp -r "$src" "$dst"
	echo "v2vm: recorded tree of kernel $(cat "$dst/kernel") in $dst"
fi
