#!/bin/bash
# record.sh OUT: makes a podman-like and a Kubernetes-like job cgroup for
# real on this (pure cgroup v2) host, runs a job in each (a shell named
# ansible-playbook with AWX's JOB_ID, a Python child holding memory, a burst
# of sleeps), and copies the kernel's cgroup files of the whole path and the
# job processes' /proc files into OUT/cgroup and OUT/proc: the layout
# collector/discover's Scan and collector/cgroup read. Then shapes.py lays
# out and records the podman, Kubernetes and receptor node shapes.
set -eu
out=$1
cg=/sys/fs/cgroup
rm -rf "$out"
mkdir -p "$out/cgroup" "$out/proc"

id() { printf %s "$1" | sha256sum | cut -c1-64; }
pod=$(id recorded-podman)
k8s=$(id recorded-worker)
uid=7d1c9a3e_5b2f_4e6a_9c8d_1f2e3a4b5c6d
podScope=machine.slice/libpod-$pod.scope
k8sScope=kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod$uid.slice/cri-containerd-$k8s.scope

# mkcg REL LEAF: makes REL, enabling cpu, memory and pids on the way
# down as systemd does, so that the leaf has their files.
mkcg() {
	local rel=$1 dir=$cg part
	for part in ${rel//\// }; do
		echo "+cpu +memory +pids" >"$dir/cgroup.subtree_control"
		dir=$dir/$part
		mkdir -p "$dir"
	done
}
mkcg "$podScope/container" # crun's sub-group: the scope itself holds none
mkcg "$k8sScope"
echo max >"$cg/$podScope/memory.max"
echo 536870912 >"$cg/$k8sScope/memory.max"

bin=$(mktemp -d)
cp /bin/dash "$bin/ansible-playbook"
# The job: joins its cgroup, forks a Python child that touches 48 MiB and
# a burst of 8 sleeps, burns some CPU, then waits.
job='echo $$ >"$1/cgroup.procs"
python3 -c "import time
b = bytearray(48 << 20)
for i in range(0, len(b), 4096): b[i] = 1
open(\"$2\", \"w\").write(\"ready\")
time.sleep(600)" &
for i in 1 2 3 4 5 6 7 8; do sleep 600 & done
i=0; while [ $i -lt 5000 ]; do i=$((i+1)); done
wait'
env -i PATH=/usr/bin:/bin JOB_ID=301 "$bin/ansible-playbook" -c "$job" job "$cg/$podScope/container" "$bin/ready1" &
env -i PATH=/usr/bin:/bin JOB_ID=302 HOSTNAME=automation-job-302-x7k2q "$bin/ansible-playbook" -c "$job" job "$cg/$k8sScope" "$bin/ready2" &
for _ in $(seq 600); do
	[ -e "$bin/ready1" ] && [ -e "$bin/ready2" ] && break
	sleep 0.1
done
[ -e "$bin/ready1" ] && [ -e "$bin/ready2" ]
# Every job holds its 10 processes (the shell, python3, 8 sleeps) and the
# shells wait: nothing forks while the files are copied.
for _ in $(seq 600); do
	[ "$(cat "$cg/$podScope/container/pids.current")" = 10 ] && [ "$(cat "$cg/$k8sScope/pids.current")" = 10 ] && break
	sleep 0.1
done
[ "$(cat "$cg/$podScope/container/pids.current")" = 10 ] && [ "$(cat "$cg/$k8sScope/pids.current")" = 10 ]
sleep 1

# The path from the root to each leaf, and what each level holds.
files="cgroup.procs cgroup.events cgroup.controllers cgroup.subtree_control cgroup.type cpu.stat
memory.current memory.peak memory.max memory.events memory.stat pids.current pids.peak pids.max"
copydir() {
	local rel=$1 f
	mkdir -p "$out/cgroup/$rel"
	for f in $files; do
		[ -e "$cg/$rel/$f" ] && cat "$cg/$rel/$f" >"$out/cgroup/$rel/$f"
	done
	return 0
}
for f in cgroup.procs cgroup.controllers cgroup.subtree_control cgroup.max.depth; do
	cat "$cg/$f" >"$out/cgroup/$f"
done
for leaf in "$podScope/container" "$k8sScope"; do
	rel=
	for part in ${leaf//\// }; do
		rel=${rel:+$rel/}$part
		copydir "$rel"
	done
done
for pid in $(cat "$cg/$podScope/container/cgroup.procs" "$cg/$k8sScope/cgroup.procs"); do
	mkdir -p "$out/proc/$pid"
	for f in comm cmdline environ stat cgroup; do
		cat "/proc/$pid/$f" >"$out/proc/$pid/$f"
	done
done
uname -r >"$out/kernel"

# End the jobs and remove the cgroups, leaves first.
for leaf in "$cg/$podScope/container" "$cg/$k8sScope"; do
	echo 1 >"$leaf/cgroup.kill"
done
wait || true
for d in "$cg/$podScope/container" "$cg/$podScope" "$cg/machine.slice" \
	"$cg/$k8sScope" "$(dirname "$cg/$k8sScope")" "$cg/kubepods.slice/kubepods-burstable.slice" "$cg/kubepods.slice"; do
	for _ in $(seq 50); do rmdir "$d" 2>/dev/null && break; sleep 0.1; done
done
# The node shapes of the scan and process-tree tests, each laid out and
# recorded on its own: OUT/podman, OUT/kubernetes, OUT/receptor.
python3 "$(dirname "$0")/shapes.py" "$out"
echo "recorded $(find "$out" -type f | wc -l) files of kernel $(uname -r) into $out"
