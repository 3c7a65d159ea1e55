// Package discover finds the AWX jobs running on a host and, for a job
// that has no cgroup of its own, measures it from /proc.
//
// It owns: walking the cgroup file system for container cgroups (podman
// execution nodes and Kubernetes nodes, cgroup v2 and v1/hybrid), telling
// each container's AWX job id from its processes, finding jobs that run
// in no container cgroup, and the process-tree stats (Tree) the sampler
// reads in their place. It does not sample on a schedule, talk to AWX or
// ship anything (collector/live, collector/awx and collector/agent do),
// and it never writes to cgroupfs or /proc. Standard library only.
//
// # What it finds
//
// Scanner.Scan walks only below the top-level cgroups its rules name, to
// a depth limit, and matches directory names against the rules' patterns.
// A container's cgroup path holds only its id, so the job id comes from
// its processes, looked up once per container and cached, from what any
// user may read first:
//
//  1. for podman, the container name conmon was given: conmon runs
//     outside the container's cgroup (libpod-conmon-<id>.scope) and is
//     found by its -c <container id> argument; its -n/--name is
//     ansible_runner_<job id>. /proc/<pid>/cmdline is world-readable;
//  2. JOB_ID in /proc/<pid>/environ of a trusted process in the
//     container's cgroup or its sub-groups (ansible-playbook,
//     ansible-runner: matched by the kernel's 15-byte comm, or by the
//     script a Python interpreter runs), where it is readable;
//  3. for Kubernetes, the pod name in HOSTNAME of such a process
//     (automation-job-<id>-<suffix>), which is there from the start of
//     ansible-runner worker, before ansible-playbook runs.
//
// An environment is readable by the process's own user, or with
// CAP_DAC_READ_SEARCH (the file is mode 0400) and CAP_SYS_PTRACE (the
// kernel's ptrace access check) for another user's; a refused read is
// counted (EnvironDenied) and the process skipped. Only the JOB_ID and
// HOSTNAME keys are read from an environment, which also holds the job's
// credentials: the buffer is wiped after each read, nothing else is
// kept, and nothing of it is logged.
//
// Every trusted process's /proc/<pid>/cgroup (world-readable) is read
// once: a process in a container cgroup (a scope rule's name matches a
// path element) that the walk does not reach, under a top no rule names
// or too deep, is reported once by Unwalked, so that a parent such as
// podman's cgroup_parent or kind's kubelet.slice can be added
// (Rules.AddParent).
//
// With Rules.ProcessTree (opt-in), Scan also reports the jobs that run in
// no container cgroup: KindProcessTree jobs, to be measured with NewTree.
// Their roots are the children of the conmon whose container has no
// cgroup found (world-readable), and trusted processes with a JOB_ID in
// no container cgroup (the one place environments outside containers are
// read). AWX's own install runs podman rootless with
// cgroup_manager = "cgroupfs", where podman gives a container no cgroup
// (podman's libpod/container_internal_linux.go, getOCICgroupPath: rootless
// with the cgroupfs manager returns an empty cgroup path), so its jobs
// share receptor.service's cgroup. Such cgroups are not walked: the
// jobs in them are found through /proc, and a shared cgroup would measure
// every job at once.
//
// # Default rules and where they come from
//
// Read in the sources, as stored by the search index used (paths in the
// projects' repositories):
//
//   - ansible-runner 2.3.1 (Debian's python3-ansible-runner, installed on
//     this project's CI host), ansible_runner/config/_base.py: the
//     container is run with "run --rm", "--env-file <artifacts>/env.list"
//     (the job's environment, JOB_ID included, reaches ansible-playbook in
//     the container) and "--name ansible_runner_{ident}", the ident passed
//     through sanitize_container_name (utils/__init__.py: characters
//     outside [a-zA-Z0-9_-] become "_").
//   - AWX, awx/main/tasks/jobs.py: RunJob.build_env sets
//     JOB_ID = str(job.pk), INVENTORY_ID, PROJECT_REVISION and AWX_HOST;
//     the runner parameters carry 'ident': self.instance.id, so the
//     container is ansible_runner_<job id>. awx/main/scheduler/kubernetes.py
//     (PodManager): pod name automation-job-<id>, labels ansible-awx and
//     ansible-awx-job-id: <id>; receptor may add a generated suffix, which
//     the default pattern allows.
//   - podman, libpod/container_internal_linux.go (getOCICgroupPath): with
//     the systemd manager the OCI cgroup is "<parent slice>:libpod:<id>",
//     i.e. <parent>/libpod-<id>.scope, parent machine.slice when rootful
//     and user.slice under user@UID.service when rootless (CGroupPath:
//     user-UID.slice/user@UID.service/user.slice/libpod-<id>.scope); with
//     the cgroupfs manager <parent>/libpod-<id>, parent /libpod_parent.
//     conmon goes to libpod-conmon-<id>.scope, which the patterns exclude.
//   - crun puts the container's processes in a "container" sub-group of
//     the scope: on v2 since containers/crun#305 (2020), on v1 too since
//     #1012 (2022), and no longer by default since #1768 (2025). Either
//     way the scope is the cgroup to sample (its counters include the
//     sub-group), and Scan reads the processes of both.
//   - kubelet, pkg/kubelet/cm/cgroup_manager_linux.go: with the systemd
//     driver a pod's cgroup is kubepods.slice/kubepods-<qos>.slice/
//     kubepods-<qos>-pod<uid>.slice with the uid's "-" escaped to "_"
//     (escapeSystemdCgroupName), and kubepods.slice/kubepods-pod<uid>.slice
//     for Guaranteed pods; with the cgroupfs driver kubepods/<qos>/pod<uid>.
//     containerd's CRI plugin (getCgroupsPath) asks for
//     "<slice>:cri-containerd:<id>", i.e. cri-containerd-<id>.scope, or
//     <parent>/<id> with cgroupfs; CRI-O uses crio-<id>.scope. containerd
//     sets HOSTNAME to the pod's hostname in every container
//     (hostnameEnv in its CRI server).
//
// The Cgroup path of a Job is the form /proc/PID/cgroup shows;
// collector/cgroup's Layout.Open takes it on v2 and on v1, where the same
// relative path exists in the cpuacct, memory and pids hierarchies.
//
// # Cost
//
// A poll reads the directories below the configured tops (systemd scopes
// that match no rule are not entered), nothing of a container already
// placed, and, for a container not placed yet, its cgroup.procs and its
// processes' comm with a doubling wait (1, 2, 4, 8 polls) between looks;
// environ only of trusted processes, once each. It reads /proc's listing
// and the comm of new processes (and the cmdline of a new conmon, the
// cgroup of a new trusted process) (a process's comm is no
// longer read once it stayed the same for 8 looks). A process caught in
// an exec, whose new comm the kernel sets before its command line and
// environment (they read empty meanwhile), is read again at the next look
// rather than taken for a process of no job. A Tree reads the stat
// of its members and of new processes at each look, and that of a stable
// non-member every 64 looks (to see an exec into a trusted name).
//
// Measured on the project's CI host (2 shared vCPUs, go test -bench,
// scan_timing_test.go): a poll of a 110-pod Kubernetes node made on a
// real cgroup2 mount takes about 2.5 ms and 1,400 allocations; on a
// file-system copy with a node's 45 files per cgroup 5–8 ms; a podman node
// with 20 jobs 0.1–0.3 ms; this host 0.09 ms. A Tree tick (CPU, Memory,
// PIDs) costs about 60 µs with ~100 processes on the host. The agent
// should scan once a second or so, not at every 250 ms sample.
package discover
