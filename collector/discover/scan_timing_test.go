package discover

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// Benchmarks of a discovery poll on generated trees shaped like busy
// nodes. Compare runs with
//
//	go test -run '^$' -bench . -benchmem -count 10 ./collector/discover > new.txt
//	benchstat old.txt new.txt
//
// The trees live on the test's file system, not on cgroupfs and procfs:
// getdents and read on kernfs/procfs cost more per call, so the numbers
// are a floor; BenchmarkScanThisHost runs on the real ones.

// controlFiles are the names in a v2 container cgroup besides its
// sub-groups (cgroup-v2.rst's core and cpu, io, memory, pids files): a
// directory read lists them all.
var controlFiles = []string{
	"cgroup.controllers", "cgroup.events", "cgroup.freeze", "cgroup.kill", "cgroup.max.depth",
	"cgroup.max.descendants", "cgroup.pressure", "cgroup.procs", "cgroup.stat", "cgroup.subtree_control",
	"cgroup.threads", "cgroup.type", "cpu.idle", "cpu.max", "cpu.max.burst", "cpu.pressure", "cpu.stat",
	"cpu.stat.local", "cpu.weight", "cpu.weight.nice", "io.max", "io.pressure", "io.stat", "io.weight",
	"memory.current", "memory.events", "memory.events.local", "memory.high", "memory.low", "memory.max",
	"memory.min", "memory.numa_stat", "memory.oom.group", "memory.peak", "memory.pressure", "memory.reclaim",
	"memory.stat", "memory.swap.current", "memory.swap.events", "memory.swap.max", "pids.current",
	"pids.events", "pids.max", "pids.peak",
}

type benchTree struct {
	root     string
	wantJobs int
	procs    int
}

func (bt *benchTree) cgroup(b *testing.B, rel string, pids ...int) {
	dir := filepath.Join(bt.root, "cgroup", rel)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	for _, f := range controlFiles {
		content := ""
		if f == "cgroup.procs" {
			for _, p := range pids {
				content += fmt.Sprintf("%d\n", p)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

func (bt *benchTree) proc(b *testing.B, pid int, comm, cmdline, environ string) {
	dir := filepath.Join(bt.root, "proc", fmt.Sprint(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	for name, content := range map[string]string{"comm": comm + "\n", "cmdline": cmdline, "environ": environ} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	bt.procs++
}

func benchID(label string, i int) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s-%d", label, i)))
	return hex.EncodeToString(sum[:])
}

// bigEnv is an AWX job's environment: some 60 variables, credentials among them.
func bigEnv(jobID int) string {
	env := ""
	for i := 0; i < 60; i++ {
		env += fmt.Sprintf("ANSIBLE_SETTING_%02d=/runner/some/fairly/long/value/%d\x00", i, i)
	}
	return env + "AWX_TOKEN=fake-token-not-a-secret\x00" + fmt.Sprintf("JOB_ID=%d\x00", jobID)
}

// kubernetesNode: 110 pods (the kubelet's default maximum) in the three
// QoS classes, each a pause and a worker container; 40 of them AWX jobs.
func kubernetesNode(b *testing.B) *benchTree {
	bt := &benchTree{root: b.TempDir()}
	bt.cgroup(b, "")
	bt.cgroup(b, "system.slice/kubelet.service", 100)
	bt.proc(b, 100, "kubelet", "kubelet\x00", "PATH=/usr/bin\x00")
	pid := 1000
	for i := 0; i < 110; i++ {
		uid := benchID("uid", i)[:32]
		var slice string
		switch i % 3 {
		case 0:
			slice = fmt.Sprintf("kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice", uid)
		case 1:
			slice = fmt.Sprintf("kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod%s.slice", uid)
		default:
			slice = fmt.Sprintf("kubepods.slice/kubepods-pod%s.slice", uid)
		}
		bt.cgroup(b, slice)
		bt.cgroup(b, slice+"/cri-containerd-"+benchID("pause", i)+".scope", pid)
		bt.proc(b, pid, "pause", "/pause\x00", "PATH=/\x00")
		pid++
		worker := slice + "/cri-containerd-" + benchID("worker", i) + ".scope"
		if i < 40 {
			bt.cgroup(b, worker, pid, pid+1, pid+2, pid+3)
			bt.proc(b, pid, "dumb-init", "dumb-init\x00", "PATH=/usr/bin\x00")
			bt.proc(b, pid+1, "ansible-runner", "/usr/bin/python3\x00/usr/local/bin/ansible-runner\x00worker\x00", fmt.Sprintf("HOSTNAME=automation-job-%d-abcde\x00", 5000+i))
			bt.proc(b, pid+2, "ansible-playboo", "/usr/bin/python3\x00/usr/local/bin/ansible-playbook\x00", bigEnv(5000+i))
			bt.proc(b, pid+3, "ssh", "ssh\x00", bigEnv(5000+i))
			bt.wantJobs++
			pid += 4
		} else {
			bt.cgroup(b, worker, pid, pid+1)
			bt.proc(b, pid, "nginx", "nginx\x00", "PATH=/usr/bin\x00")
			bt.proc(b, pid+1, "nginx", "nginx\x00", "PATH=/usr/bin\x00")
			pid += 2
		}
	}
	return bt
}

// podmanNode: 20 concurrent jobs on an execution node (rootful, crun's
// container sub-group), each with its conmon scope, plus 200 other
// processes on the host.
func podmanNode(b *testing.B) *benchTree {
	bt := &benchTree{root: b.TempDir()}
	bt.cgroup(b, "")
	bt.cgroup(b, "user.slice/user-1000.slice/user@1000.service/init.scope")
	bt.cgroup(b, "system.slice/receptor.service", 100)
	bt.proc(b, 100, "receptor", "receptor\x00", "PATH=/usr/bin\x00")
	pid := 1000
	for i := 0; i < 20; i++ {
		id := benchID("podman", i)
		bt.cgroup(b, "machine.slice/libpod-conmon-"+id+".scope", pid)
		bt.proc(b, pid, "conmon", "conmon\x00-c\x00"+id+"\x00-n\x00"+fmt.Sprintf("ansible_runner_%d", 7000+i)+"\x00", "PATH=/usr/bin\x00")
		bt.cgroup(b, "machine.slice/libpod-"+id+".scope")
		bt.cgroup(b, "machine.slice/libpod-"+id+".scope/container", pid+1, pid+2, pid+3)
		bt.proc(b, pid+1, "ansible-playboo", "/usr/bin/python3\x00/usr/local/bin/ansible-playbook\x00", bigEnv(7000+i))
		bt.proc(b, pid+2, "ansible-playboo", "/usr/bin/python3\x00/usr/local/bin/ansible-playbook\x00", bigEnv(7000+i))
		bt.proc(b, pid+3, "ssh", "ssh\x00", bigEnv(7000+i))
		bt.wantJobs++
		pid += 4
	}
	for i := 0; i < 200; i++ {
		bt.proc(b, 5000+i, fmt.Sprintf("daemon%d", i), "daemon\x00", "PATH=/usr/bin\x00")
	}
	return bt
}

func BenchmarkScan(b *testing.B) {
	shapes := []struct {
		name string
		make func(*testing.B) *benchTree
	}{
		{"kubernetes/pods=110", kubernetesNode},
		{"podman/jobs=20", podmanNode},
	}
	for _, shape := range shapes {
		bt := shape.make(b)
		for _, processTree := range []bool{false, true} {
			b.Run(fmt.Sprintf("node=%s/processtree=%v", shape.name, processTree), func(b *testing.B) {
				r := DefaultRules()
				r.ProcessTree = processTree
				s, err := NewScanner(filepath.Join(bt.root, "cgroup"), filepath.Join(bt.root, "proc"), r)
				if err != nil {
					b.Fatal(err)
				}
				// The first scan places every container (reads /proc); a
				// poll is every later one.
				if jobs, err := s.Scan(); err != nil || len(jobs) != bt.wantJobs {
					b.Fatalf("first scan: %d jobs, %v; want %d", len(jobs), err, bt.wantJobs)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					jobs, err := s.Scan()
					if err != nil || len(jobs) != bt.wantJobs {
						b.Fatalf("scan: %d jobs, %v; want %d", len(jobs), err, bt.wantJobs)
					}
				}
			})
		}
		b.Run(fmt.Sprintf("node=%s/first", shape.name), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				jobs, err := Scan(filepath.Join(bt.root, "cgroup"), filepath.Join(bt.root, "proc"), DefaultRules())
				if err != nil || len(jobs) != bt.wantJobs {
					b.Fatalf("scan: %d jobs, %v; want %d", len(jobs), err, bt.wantJobs)
				}
			}
		})
	}
}

// BenchmarkScanThisHost polls this machine's real cgroupfs and /proc.
func BenchmarkScanThisHost(b *testing.B) {
	s, err := NewScanner("/sys/fs/cgroup", "/proc", DefaultRules())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Scan(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Scan(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTreeTick is one sampler tick (CPU, Memory, PIDs) of a
// process-tree job on this machine's real /proc: the cost per job per poll.
func BenchmarkTreeTick(b *testing.B) {
	tr, err := NewTree("/proc", 1, DefaultRules())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var procs int
	for i := 0; i < b.N; i++ {
		if _, err := tr.CPU(); err != nil {
			b.Fatal(err)
		}
		if _, _, err := tr.Memory(); err != nil {
			b.Fatal(err)
		}
		if _, _, err := tr.PIDs(); err != nil {
			b.Fatal(err)
		}
		procs = len(tr.snap)
	}
	if procs == 0 {
		b.Fatal("the tick saw no process in /proc")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(procs), "ns/process")
}

// BenchmarkScanKernfs polls a Kubernetes-node-sized tree (110 pods of two
// containers, 40 of them jobs) made on a real cgroup2 mount, so the
// directory reads are kernfs's. Needs root; the cgroups hold no process,
// so every container is unplaced and looked at with the doubling wait.
// (The hybrid host's cgroup2 has no controllers: its directories list
// about 15 files where a node's list about 45.)
func BenchmarkScanKernfs(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	mnt := b.TempDir()
	if err := syscall.Mount("none", mnt, "cgroup2", 0, ""); err != nil {
		b.Skipf("cannot mount cgroup2: %v", err)
	}
	defer func() {
		if err := syscall.Unmount(mnt, 0); err != nil {
			b.Errorf("unmount: %v", err)
		}
	}()
	top := fmt.Sprintf("peakline-discover-bench-%d", os.Getpid())
	var made []string
	mk := func(rel string) {
		dir := filepath.Join(mnt, top, rel)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		made = append(made, dir)
	}
	defer func() {
		slices.Reverse(made)
		for _, d := range made {
			_ = syscall.Rmdir(d)
		}
		_ = syscall.Rmdir(filepath.Join(mnt, top, "kubepods.slice/kubepods-burstable.slice"))
		_ = syscall.Rmdir(filepath.Join(mnt, top, "kubepods.slice/kubepods-besteffort.slice"))
		_ = syscall.Rmdir(filepath.Join(mnt, top, "kubepods.slice"))
		_ = syscall.Rmdir(filepath.Join(mnt, top))
	}()
	for i := 0; i < 110; i++ {
		uid := benchID("uid", i)[:32]
		slice := "kubepods.slice/kubepods-pod" + uid + ".slice"
		switch i % 3 {
		case 0:
			slice = "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uid + ".slice"
		case 1:
			slice = "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + uid + ".slice"
		}
		mk(slice)
		mk(slice + "/cri-containerd-" + benchID("pause", i) + ".scope")
		mk(slice + "/cri-containerd-" + benchID("worker", i) + ".scope")
	}
	r := DefaultRules()
	r.Scopes = append(r.Scopes, ScopeRule{Kind: KindKubernetes, Top: top, Name: `^cri-containerd-([0-9a-f]{64})\.scope$`})
	r.ProcessTree = false
	s, err := NewScanner(mnt, "/proc", r)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Scan(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if n := len(s.containers); n != 220 {
		b.Fatalf("the scanner knows %d containers; want 220", n)
	}
}
