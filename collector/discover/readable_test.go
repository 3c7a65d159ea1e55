package discover

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeNode is a cgroup v2 tree and a /proc written by a test.
type fakeNode struct {
	t    *testing.T
	root string
}

func newFakeNode(t *testing.T) *fakeNode {
	n := &fakeNode{t: t, root: t.TempDir()}
	n.write("cgroup/cgroup.procs", "1\n")
	n.proc(1, "systemd", "/sbin/init\x00", "0::/init.scope\n", "")
	return n
}

func (n *fakeNode) write(rel, content string) {
	n.t.Helper()
	p := filepath.Join(n.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		n.t.Fatal(err)
	}
}

// proc writes a process; environ "" leaves the file out, as a process
// whose environment the agent may not read.
func (n *fakeNode) proc(pid int, comm, cmdline, cgroup, environ string) {
	n.write(fmt.Sprintf("proc/%d/comm", pid), comm+"\n")
	n.write(fmt.Sprintf("proc/%d/cmdline", pid), cmdline)
	n.write(fmt.Sprintf("proc/%d/cgroup", pid), cgroup)
	if environ != "" {
		n.write(fmt.Sprintf("proc/%d/environ", pid), environ)
	}
}

// container lays out a podman container: cgroup rel (below the root)
// holding pid, which runs ansible-playbook, and its conmon (pid-1) naming
// job id, outside the container's cgroup as podman puts it.
func (n *fakeNode) container(rel string, pid int, id int64) string {
	cid := strings.Repeat(fmt.Sprintf("%x", pid%16), 64)
	dir := strings.ReplaceAll(rel, "ID", cid)
	n.write("cgroup/"+dir+"/container/cgroup.procs", fmt.Sprintf("%d\n", pid))
	n.proc(pid, "ansible-playboo", "/usr/bin/python3\x00/usr/bin/ansible-playbook\x00site.yml\x00", "0::/"+dir+"/container\n", "")
	n.proc(pid-1, "conmon", "/usr/bin/conmon\x00--api-version\x001\x00-c\x00"+cid+"\x00-u\x00"+cid+"\x00-n\x00"+fmt.Sprintf("ansible_runner_%d", id)+"\x00", "0::/machine.slice/libpod-conmon-"+cid+".scope\n", "")
	return cid
}

func (n *fakeNode) scanner(r Rules) *Scanner {
	n.t.Helper()
	s, err := NewScanner(filepath.Join(n.root, "cgroup"), filepath.Join(n.root, "proc"), r)
	if err != nil {
		n.t.Fatal(err)
	}
	return s
}

// TestScanWorldReadable finds a podman job with no environment readable
// at all: conmon's command line names it.
func TestScanWorldReadable(t *testing.T) {
	n := newFakeNode(t)
	cid := n.container("machine.slice/libpod-ID.scope", 501, 41)
	got, err := n.scanner(DefaultRules()).Scan()
	if err != nil {
		t.Fatal(err)
	}
	checkJobs(t, got, []Job{{ID: 41, Kind: KindPodman, Cgroup: "/machine.slice/libpod-" + cid + ".scope", ContainerID: cid, PIDs: []int{501}, Via: ViaConmon}})
}

// TestScanEnvironLast: where conmon tells the job, the environment is
// not read even when readable; without conmon it is the fallback.
func TestScanEnvironLast(t *testing.T) {
	n := newFakeNode(t)
	cid := n.container("machine.slice/libpod-ID.scope", 601, 42)
	// An environment saying another id: conmon's word wins, since it is
	// read first.
	n.write("proc/601/environ", "JOB_ID=99\x00")
	got, err := n.scanner(DefaultRules()).Scan()
	if err != nil {
		t.Fatal(err)
	}
	checkJobs(t, got, []Job{{ID: 42, Kind: KindPodman, Cgroup: "/machine.slice/libpod-" + cid + ".scope", ContainerID: cid, PIDs: []int{601}, Via: ViaConmon}})

	if err := os.RemoveAll(filepath.Join(n.root, "proc/600")); err != nil { // conmon gone
		t.Fatal(err)
	}
	got, err = n.scanner(DefaultRules()).Scan()
	if err != nil {
		t.Fatal(err)
	}
	checkJobs(t, got, []Job{{ID: 99, Kind: KindPodman, Cgroup: "/machine.slice/libpod-" + cid + ".scope", ContainerID: cid, PIDs: []int{601}, Via: ViaEnviron}})
}

// TestScanUnwalked tells, once each, the containers of trusted processes
// under a parent no rule walks (podman's cgroup_parent) or deeper than
// MaxDepth, and measures nothing of them; a rule for the parent finds
// the job.
func TestScanUnwalked(t *testing.T) {
	n := newFakeNode(t)
	walked := n.container("machine.slice/libpod-ID.scope", 701, 51)
	custom := n.container("peakline-custom.slice/libpod-ID.scope", 801, 52)
	deep := n.container("machine.slice/a.slice/b.slice/c.slice/d.slice/e.slice/libpod-ID.scope", 901, 53)
	s := n.scanner(DefaultRules())
	for i := range 3 {
		got, err := s.Scan()
		if err != nil {
			t.Fatal(err)
		}
		if ids := jobIDs(got); !slices.Equal(ids, []int64{51}) {
			t.Fatalf("scan %d: jobs %v, want [51] (only the walked container)", i, ids)
		}
		want := []string{"/machine.slice/a.slice/b.slice/c.slice/d.slice/e.slice/libpod-" + deep + ".scope", "/peakline-custom.slice/libpod-" + custom + ".scope"}
		if i > 0 {
			want = nil
		}
		un := s.Unwalked()
		slices.Sort(un)
		if !slices.Equal(un, want) {
			t.Errorf("scan %d: unwalked %q, want %q", i, un, want)
		}
	}
	_ = walked

	r := DefaultRules()
	if err := r.AddParent(KindPodman, "peakline-custom.slice"); err != nil {
		t.Fatal(err)
	}
	s = n.scanner(r)
	got, err := s.Scan()
	if err != nil {
		t.Fatal(err)
	}
	if ids := jobIDs(got); !slices.Equal(ids, []int64{51, 52}) {
		t.Fatalf("with the custom parent added: jobs %v, want [51 52]", ids)
	}
	if un := s.Unwalked(); len(un) != 1 || !strings.Contains(un[0], deep) {
		t.Errorf("unwalked %q, want the deep one only", un)
	}
}

func TestAddParent(t *testing.T) {
	r := DefaultRules()
	before := len(r.Scopes)
	if err := r.AddParent(KindKubernetes, "custom-kube.slice"); err != nil {
		t.Fatal(err)
	}
	added := r.Scopes[before:]
	if len(added) != 1 || added[0].Top != "custom-kube.slice" || added[0].Kind != KindKubernetes || added[0].Name != DefaultRules().Scopes[3].Name {
		t.Errorf("added %+v, want the systemd-driver kubernetes pattern under custom-kube.slice", added)
	}
	for _, bad := range []struct {
		kind Kind
		top  string
	}{{KindProcessTree, "x.slice"}, {KindPodman, ""}, {KindPodman, "a/b"}, {KindPodman, "[x"}} {
		r := DefaultRules()
		if err := r.AddParent(bad.kind, bad.top); err == nil {
			t.Errorf("AddParent(%q, %q): no error", bad.kind, bad.top)
		}
	}
}

// TestScanExecInProgress: processes read while they exec (the new comm
// set, the command line and environment not yet: they read empty) are
// read again at the next look, not taken for processes of no job: a
// conmon naming a process-tree job, a trusted process whose environment
// names one, and a container's ansible-playbook, a Python whose command
// line tells it is trusted.
func TestScanExecInProgress(t *testing.T) {
	sh := loadShape(t, "receptor")
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(sh.dir)); err != nil {
		t.Fatal(err)
	}
	// Job 104: its conmon and playbook exec; job 103: its conmon is gone
	// and its playbook, fork and version run exec.
	if err := os.RemoveAll(filepath.Join(dir, "proc", fmt.Sprint(sh.pid("conmon103")))); err != nil {
		t.Fatal(err)
	}
	blank := map[string][]byte{}
	for _, f := range []string{
		fmt.Sprintf("proc/%d/cmdline", sh.pid("conmon104")),
		fmt.Sprintf("proc/%d/environ", sh.pid("playbook104")),
		fmt.Sprintf("proc/%d/environ", sh.pid("playbook103")),
		fmt.Sprintf("proc/%d/environ", sh.pid("fork103")),
		fmt.Sprintf("proc/%d/cmdline", sh.pid("version103")),
		fmt.Sprintf("proc/%d/environ", sh.pid("version103")),
	} {
		p := filepath.Join(dir, f)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		blank[p] = b
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := NewScanner(filepath.Join(dir, "cgroup"), filepath.Join(dir, "proc"), treeRules())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Scan(); err != nil || len(got) != 0 {
		t.Fatalf("while they exec: %+v, %v; want no job", got, err)
	}
	for p, b := range blank {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Scan()
	if err != nil {
		t.Fatal(err)
	}
	checkJobs(t, got, []Job{
		{ID: 103, Kind: KindProcessTree, PIDs: sh.pids("playbook103", "fork103", "version103"), Via: ViaEnviron},
		{ID: 104, Kind: KindProcessTree, PIDs: sh.pids("conmon104", "playbook104"), Via: ViaConmon},
	})

	// A podman container without conmon: its ansible-playbook, run as
	// python3 (the command line tells it is trusted), execs.
	n := newFakeNode(t)
	cid := n.container("machine.slice/libpod-ID.scope", 801, 61)
	if err := os.RemoveAll(filepath.Join(n.root, "proc/800")); err != nil {
		t.Fatal(err)
	}
	cmdline, err := os.ReadFile(filepath.Join(n.root, "proc/801/cmdline"))
	if err != nil {
		t.Fatal(err)
	}
	n.write("proc/801/comm", "python3\n")
	n.write("proc/801/cmdline", "")
	n.write("proc/801/environ", "")
	cs := n.scanner(DefaultRules())
	if got, err := cs.Scan(); err != nil || len(got) != 0 {
		t.Fatalf("while ansible-playbook execs: %+v, %v; want no job", got, err)
	}
	// Its command line first, then its environment, one look apart.
	n.write("proc/801/cmdline", string(cmdline))
	scans := 1
	for ; scans <= maxWait+1; scans++ {
		if got, err := cs.Scan(); err != nil || len(got) != 0 {
			t.Fatalf("with the command line but no environment: %+v, %v; want no job", got, err)
		}
	}
	n.write("proc/801/environ", "JOB_ID=61\x00")
	want := []Job{{ID: 61, Kind: KindPodman, Cgroup: "/machine.slice/libpod-" + cid + ".scope", ContainerID: cid, PIDs: []int{801}, Via: ViaEnviron}}
	// An unplaced container is looked into again within maxWait scans.
	for i := 0; ; i++ {
		got, err := cs.Scan()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > 0 {
			checkJobs(t, got, want)
			break
		}
		if i > maxWait {
			t.Fatalf("%d scans after its environment was there, the container's job is not found", i+1)
		}
	}
}
