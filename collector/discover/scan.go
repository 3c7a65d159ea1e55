package discover

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
)

// Job is one running AWX job found on this host.
type Job struct {
	// ID is the AWX job id.
	ID int64
	// Kind says where the job runs and how to sample it.
	Kind Kind
	// Cgroup is the job's container cgroup as a path from the
	// hierarchy's root, the form /proc/PID/cgroup shows
	// ("/machine.slice/libpod-<id>.scope"). collector/cgroup's
	// Layout.Open accepts it on v2 and on v1, where the same relative
	// path exists in each controller's hierarchy. Empty for
	// KindProcessTree: such a job has no cgroup of its own, sample it
	// with NewTree.
	Cgroup string
	// Dir is Cgroup's directory in the hierarchy Scan walked (below
	// cgroupRoot; on v1 the memory hierarchy's). Empty for
	// KindProcessTree.
	Dir string
	// ContainerID is the container's 64-hex id; empty for
	// KindProcessTree.
	ContainerID string
	// PIDs are, for a container, the processes that were in its cgroup
	// and sub-groups when the scan that placed it ran (not read again, to
	// keep polls cheap); for KindProcessTree, the conmon monitoring the
	// job's container and the trusted processes whose environment names
	// the job at this scan (the roots of its tree). Ascending.
	PIDs []int
	// Via says how the id was found: ViaEnviron, ViaPodName or ViaConmon.
	Via string
}

// How a job's id was found.
const (
	ViaEnviron = "environ"  // JobIDEnv of a trusted process
	ViaPodName = "pod-name" // PodNameEnv of a trusted process (Kubernetes)
	ViaConmon  = "conmon"   // the container name conmon was given
)

// Scanner finds the running AWX jobs of a host, poll after poll. It
// remembers each container's job id, so /proc is read only for
// containers it has not placed yet. Not safe for concurrent use.
type Scanner struct {
	cgroupRoot, procRoot string
	rules                *compiled

	r    fileReader
	hier string // the hierarchy walked: cgroupRoot or a v1 controller's directory below it
	gen  uint64

	containers map[string]*containerState // by container id
	procs      map[int]*procState         // the /proc pass's cache, by pid

	unwalkedSeen map[string]struct{} // container cgroups told by Unwalked
	unwalked     []string            // not told yet
	// environDenied counts the environment reads refused since the last
	// EnvironDenied.
	environDenied int

	// scratch, reused between scans
	found  []foundCgroup
	dirs   []string
	pidBuf []int
}

type containerState struct {
	gen   uint64
	jobID int64
	via   string
	pids  []int // at placement
	// An unplaced container is looked at again after wait scans, the
	// wait doubling up to maxWait: a pod's pause container or a
	// non-AWX container costs almost nothing, a job's is placed within
	// maxWait polls of its trusted process starting.
	wait, waited int
	// checked are the processes examined without finding the id, with
	// the comm they had: examined again only when it changes (an exec).
	checked map[int]string
}

// procState caches what the /proc pass learnt about one process.
type procState struct {
	gen     uint64
	comm    string
	trusted bool
	jobID   int64  // from JobIDEnv, 0 if none
	cid     string // conmon: the container id (-c)
	cjob    int64  // conmon: the job id from the container name
	inScope bool   // its cgroup is a container's (by the scope rules)
	// again marks a process caught in an exec (errExecing): it is learnt
	// again at the next look.
	again bool
	// stable counts the looks that found the same comm; from
	// stableAfter on, the comm is not read again while the pid lives.
	stable int
}

// stableAfter is how many looks a process's comm must stay the same
// before it is trusted not to change: a process execs (and changes its
// comm) right after it is forked, or at its container's start, not
// later. A pid that goes away and comes back between two looks is
// taken for the same process.
const stableAfter = 8

type foundCgroup struct {
	kind Kind
	id   string
	dir  string // host directory
	rel  string // "/machine.slice/…"
}

// maxWait is the most scans an unplaced container is skipped for.
const maxWait = 8

// v1Order are the v1 hierarchies tried, in order, when cgroupRoot is
// not itself a hierarchy: every controller holds the same tree of
// container cgroups, the first one found is walked.
var v1Order = []string{"memory", "pids", "cpuacct", "cpu,cpuacct", "systemd", "unified"}

// NewScanner checks the rules and returns a Scanner. cgroupRoot is where
// cgroup file systems are mounted (/sys/fs/cgroup): a cgroup2 mount, or a
// directory holding v1 hierarchies (memory, pids, …). procRoot is /proc.
func NewScanner(cgroupRoot, procRoot string, rules Rules) (*Scanner, error) {
	c, err := rules.compile()
	if err != nil {
		return nil, err
	}
	return &Scanner{
		cgroupRoot: cgroupRoot, procRoot: procRoot, rules: c,
		containers: map[string]*containerState{}, procs: map[int]*procState{},
		unwalkedSeen: map[string]struct{}{},
	}, nil
}

// Scan returns the running AWX jobs on this host once; see Scanner.Scan.
func Scan(cgroupRoot, procRoot string, rules Rules) ([]Job, error) {
	s, err := NewScanner(cgroupRoot, procRoot, rules)
	if err != nil {
		return nil, err
	}
	return s.Scan()
}

// Scan walks the configured top-level cgroups for container cgroups,
// places each container's job, and, with Rules.ProcessTree, finds the
// jobs that run outside any container cgroup. Containers whose job id is
// not known yet (ansible-playbook has not started, or the container is
// not an AWX job, such as a pod's pause container) are left out and
// looked at again next time. Jobs are sorted by id, then container id;
// the caller owns the slice.
func (s *Scanner) Scan() ([]Job, error) {
	s.gen++
	if s.hier == "" {
		h, err := s.hierarchy()
		if err != nil {
			return nil, err
		}
		s.hier = h
	}
	s.found = s.found[:0]
	for _, top := range s.rules.tops {
		if err := s.walkTop(top); err != nil {
			return nil, err
		}
	}

	// The world-readable sources first: conmon's command line names a
	// podman container's job, the processes' cgroups tell containers
	// under parents not walked.
	conmons, err := s.procPass()
	if err != nil {
		return nil, err
	}
	var jobs []Job
	inContainer := map[int]bool{}
	for _, f := range s.found {
		c := s.containers[f.id]
		if c == nil {
			c = &containerState{}
			s.containers[f.id] = c
		}
		c.gen = s.gen
		if c.jobID == 0 && f.kind == KindPodman {
			if id := conmons[f.id]; id != 0 {
				c.jobID, c.via, c.checked = id, ViaConmon, nil
				c.pids = s.cgroupPids(f.dir)
			}
		}
		if c.jobID == 0 {
			if c.waited < c.wait {
				c.waited++
				continue
			}
			c.waited = 0
			c.wait = min(max(1, 2*c.wait), maxWait)
			pids := s.cgroupPids(f.dir)
			for _, p := range pids {
				inContainer[p] = true
			}
			s.placeContainer(c, f.kind, pids)
			c.pids = pids
		}
		if c.jobID == 0 {
			continue
		}
		for _, p := range c.pids {
			inContainer[p] = true
		}
		jobs = append(jobs, Job{ID: c.jobID, Kind: f.kind, Cgroup: f.rel, Dir: f.dir, ContainerID: f.id, PIDs: slices.Clone(c.pids), Via: c.via})
	}

	if s.rules.ProcessTree {
		roots := map[int64][]int{}
		byConmon := map[int64]bool{}
		for pid, p := range s.procs {
			switch {
			case p.cjob != 0:
				// A conmon whose container has no cgroup found: the
				// container's processes are its descendants.
				if c := s.containers[p.cid]; c == nil || c.gen != s.gen {
					roots[p.cjob] = append(roots[p.cjob], pid)
					byConmon[p.cjob] = true
				}
			case p.trusted && p.jobID != 0 && !p.inScope && !inContainer[pid]:
				roots[p.jobID] = append(roots[p.jobID], pid)
			}
		}
		for id, pids := range roots {
			if slices.ContainsFunc(jobs, func(j Job) bool { return j.ID == id }) {
				continue // its container was found: that is the better measure
			}
			slices.Sort(pids)
			via := ViaEnviron
			if byConmon[id] {
				via = ViaConmon
			}
			jobs = append(jobs, Job{ID: id, Kind: KindProcessTree, PIDs: pids, Via: via})
		}
	}

	for id, c := range s.containers {
		if c.gen != s.gen {
			delete(s.containers, id)
		}
	}
	slices.SortFunc(jobs, func(a, b Job) int {
		return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.ContainerID, b.ContainerID))
	})
	return jobs, nil
}

// hierarchy picks the directory to walk.
func (s *Scanner) hierarchy() (string, error) {
	if exists(filepath.Join(s.cgroupRoot, "cgroup.procs")) {
		return s.cgroupRoot, nil
	}
	for _, h := range v1Order {
		dir := filepath.Join(s.cgroupRoot, h)
		if exists(filepath.Join(dir, "cgroup.procs")) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("find cgroup hierarchy under %q: no cgroup.procs there nor in any of %v (is --cgroup-root the cgroup mount point, such as /sys/fs/cgroup?)", s.cgroupRoot, v1Order)
}

func exists(p string) bool {
	var st syscall.Stat_t
	return syscall.Stat(p, &st) == nil
}

// walkTop walks the top-level directories matching top.
func (s *Scanner) walkTop(top string) error {
	if !hasMeta(top) {
		return s.walk(filepath.Join(s.hier, top), "/"+top, top, 1)
	}
	var names []string
	err := s.r.readDir(s.hier, func(name []byte, typ uint8) {
		if typ == syscall.DT_DIR {
			if ok, _ := path.Match(top, string(name)); ok {
				names = append(names, string(name))
			}
		}
	})
	if err != nil {
		return fmt.Errorf("list cgroup hierarchy %q: %w", s.hier, err)
	}
	for _, n := range names {
		if err := s.walk(filepath.Join(s.hier, n), "/"+n, top, 1); err != nil {
			return err
		}
	}
	return nil
}

func hasMeta(p string) bool {
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '*', '?', '[', '\\':
			return true
		}
	}
	return false
}

// walk looks for container cgroups below dir (whose cgroup path is rel),
// depth levels below the top. A directory that vanished or cannot be
// read is skipped: cgroups come and go while we walk.
func (s *Scanner) walk(dir, rel, top string, depth int) error {
	start := len(s.dirs)
	err := s.r.readDir(dir, func(name []byte, typ uint8) {
		if typ != syscall.DT_DIR {
			return
		}
		for _, rule := range s.rules.scopes {
			if rule.top != top {
				continue
			}
			if m := rule.name.FindSubmatchIndex(name); m != nil && m[2] >= 0 {
				n := string(name)
				s.found = append(s.found, foundCgroup{
					kind: rule.kind, id: n[m[2]:m[3]],
					dir: filepath.Join(dir, n), rel: rel + "/" + n,
				})
				return // a container's own sub-groups are not containers
			}
		}
		// systemd scopes are leaves of the unit tree: a container's cgroup
		// is never below another scope (libpod-conmon-<id>.scope,
		// session-N.scope, init.scope), so those are not read.
		if depth < s.rules.MaxDepth && !bytes.HasSuffix(name, []byte(".scope")) {
			s.dirs = append(s.dirs, string(name))
		}
	})
	if err != nil {
		s.dirs = s.dirs[:start]
		if gone(err) || errors.Is(err, syscall.ENOTDIR) {
			return nil
		}
		return fmt.Errorf("list cgroup %q: %w", dir, err)
	}
	// s.dirs is a stack shared by the recursion: copy this level's names
	// out before descending, as deeper levels append to it.
	names := slices.Clone(s.dirs[start:])
	s.dirs = s.dirs[:start]
	for _, n := range names {
		if err := s.walk(filepath.Join(dir, n), rel+"/"+n, top, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// cgroupPids returns the processes in dir and its sub-groups (crun puts
// a container's processes in a "container" sub-group), ascending.
func (s *Scanner) cgroupPids(dir string) []int {
	var pids []int
	var visit func(dir string, depth int)
	visit = func(dir string, depth int) {
		if b, err := s.r.read(filepath.Join(dir, "cgroup.procs")); err == nil {
			pids = appendPids(pids, b)
		}
		if depth >= 3 {
			return
		}
		var subs []string
		_ = s.r.readDir(dir, func(name []byte, typ uint8) {
			if typ == syscall.DT_DIR {
				subs = append(subs, string(name))
			}
		})
		for _, sub := range subs {
			visit(filepath.Join(dir, sub), depth+1)
		}
	}
	visit(dir, 0)
	slices.Sort(pids)
	return slices.Compact(pids)
}

// placeContainer looks for the job id in the environment of the
// container's trusted processes: JobIDEnv of any of them, else the pod
// name of a Kubernetes one.
func (s *Scanner) placeContainer(c *containerState, kind Kind, pids []int) {
	if c.checked == nil {
		c.checked = map[int]string{}
	}
	for pid := range c.checked {
		if _, ok := slices.BinarySearch(pids, pid); !ok {
			delete(c.checked, pid)
		}
	}
	var podJob int64
	for _, pid := range pids {
		comm, err := s.comm(pid)
		if err != nil {
			continue // gone, or not ours to read
		}
		if prev, ok := c.checked[pid]; ok && prev == string(comm) {
			continue
		}
		c.checked[pid] = string(comm)
		trusted, err := s.trusted(pid, comm)
		if errors.Is(err, errExecing) {
			delete(c.checked, pid) // examined again at the next look
			continue
		}
		if !trusted {
			continue
		}
		jobID, pj, again := s.environIDs(pid, kind == KindKubernetes)
		if again {
			delete(c.checked, pid)
		}
		if jobID != 0 {
			c.jobID, c.via, c.checked = jobID, ViaEnviron, nil
			return
		}
		if podJob == 0 {
			podJob = pj
		}
	}
	if podJob != 0 {
		c.jobID, c.via, c.checked = podJob, ViaPodName, nil
	}
}

// comm reads /proc/<pid>/comm without its newline; valid until the next read.
func (s *Scanner) comm(pid int) ([]byte, error) {
	b, err := s.r.read(s.procFile(pid, "comm"))
	if err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b, []byte("\n")), nil
}

func (s *Scanner) procFile(pid int, name string) string {
	return s.procRoot + "/" + strconv.Itoa(pid) + "/" + name
}

// trusted reports whether pid, whose comm is comm, runs a trusted
// executable; errExecing when a Python interpreter's command line, which
// tells, is not there yet. comm must not alias the read buffer's later
// contents: the caller passes a slice it may lose, so its verdict is
// taken first.
func (s *Scanner) trusted(pid int, comm []byte) (bool, error) {
	ok, python := s.rules.trustedComm(comm)
	if ok || !python {
		return ok, nil
	}
	return trustedCmdline(&s.r, s.rules, s.procFile(pid, "cmdline"))
}

func trustedCmdline(r *fileReader, rules *compiled, file string) (bool, error) {
	b, err := r.readArgs(file)
	if err != nil {
		return false, err
	}
	_, rest := nextArg(b)
	script, _ := nextArg(rest)
	return rules.trustedScript(script), nil
}

// environIDs reads the job id (JobIDEnv) and, when pod is set, the job id
// in the pod name (PodNameEnv) from pid's environment, and wipes the
// buffer the environment was read into. again is set when the
// environment is not there yet (errExecing).
func (s *Scanner) environIDs(pid int, pod bool) (jobID, podJob int64, again bool) {
	jobID, podJob, err := environIDs(&s.r, s.rules, s.procFile(pid, "environ"), pod)
	if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) {
		s.environDenied++
	}
	return jobID, podJob, errors.Is(err, errExecing)
}

// EnvironDenied returns how many reads of a trusted process's environment
// were refused (EACCES, EPERM) since the last call: the agent runs as
// another user than the job's without CAP_SYS_PTRACE and
// CAP_DAC_READ_SEARCH. Such a container is placed only by what is
// world-readable (conmon), such a process-tree job not at all.
func (s *Scanner) EnvironDenied() int {
	n := s.environDenied
	s.environDenied = 0
	return n
}

func environIDs(r *fileReader, rules *compiled, file string, pod bool) (jobID, podJob int64, err error) {
	env, err := r.readArgs(file)
	if err != nil {
		return 0, 0, err
	}
	defer r.wipe()
	if v, ok := envValue(env, rules.jobKey); ok {
		jobID, _ = parseJobID(v)
	}
	if pod && jobID == 0 && rules.podName != nil {
		if v, ok := envValue(env, rules.podKey); ok {
			if m := rules.podName.FindSubmatch(v); m != nil {
				podJob, _ = parseJobID(m[1])
			}
		}
	}
	return jobID, podJob, nil
}

// procPass reads the comm of every process new or not yet stable, and
// returns the job id of each container a conmon process monitors. It
// leaves in s.procs what it learnt of each live process.
func (s *Scanner) procPass() (conmons map[string]int64, err error) {
	s.pidBuf, err = s.r.pids(s.procRoot, s.pidBuf)
	if err != nil {
		return nil, fmt.Errorf("list processes in %q: %w", s.procRoot, err)
	}
	conmons = map[string]int64{}
	for _, pid := range s.pidBuf {
		p := s.procs[pid]
		if p == nil || p.stable < stableAfter {
			comm, err := s.comm(pid)
			if err != nil {
				continue
			}
			switch {
			case p == nil || p.comm != string(comm):
				p = &procState{comm: string(comm)}
				s.procs[pid] = p
				s.learn(pid, p)
			case p.again:
				// Caught in an exec at the last look: learnt anew.
				p = &procState{comm: p.comm, stable: p.stable + 1}
				s.procs[pid] = p
				s.learn(pid, p)
			default:
				p.stable++
			}
		}
		p.gen = s.gen
		if p.cid != "" && p.cjob != 0 {
			conmons[p.cid] = p.cjob
		}
	}
	for pid, p := range s.procs {
		if p.gen != s.gen {
			delete(s.procs, pid)
		}
	}
	return conmons, nil
}

// learn fills a new procState: a conmon's container and name, from its
// command line; a trusted process's cgroup, and, with ProcessTree, the
// job id in its environment when it is in no container's cgroup. The
// environment is the one source that needs privileges: it is read last,
// and only for the process-tree fallback. A process caught in an exec
// (errExecing) is marked again.
func (s *Scanner) learn(pid int, p *procState) {
	if s.rules.ConmonComm != "" && p.comm == s.rules.ConmonComm {
		b, err := s.r.readArgs(s.procFile(pid, "cmdline"))
		if err != nil {
			p.again = errors.Is(err, errExecing)
			return
		}
		cid, name := conmonArgs(b)
		if m := s.rules.conmonName.FindSubmatch(name); m != nil && len(cid) > 0 {
			p.cid = string(cid)
			p.cjob, _ = parseJobID(m[1])
		}
		return
	}
	var err error
	p.trusted, err = s.trusted(pid, []byte(p.comm))
	if !p.trusted {
		p.again = errors.Is(err, errExecing)
		return
	}
	p.inScope = s.inContainerCgroup(pid)
	if s.rules.ProcessTree && !p.inScope {
		p.jobID, _, p.again = s.environIDs(pid, false)
	}
}

// inContainerCgroup reports whether /proc/<pid>/cgroup (world-readable)
// puts the process in a cgroup a scope rule's name matches, in any
// hierarchy: then it belongs to a container job even when Scan has not
// looked into that container at this poll, and is no process-tree root.
// A container cgroup the walk does not reach (under a top no rule names,
// or deeper than MaxDepth) is noted for Unwalked.
func (s *Scanner) inContainerCgroup(pid int) bool {
	b, err := s.r.read(s.procFile(pid, "cgroup"))
	if err != nil {
		return false
	}
	in := false
	for _, line := range bytes.Split(b, []byte("\n")) {
		// "hierarchy-id:controllers:path"
		parts := bytes.SplitN(line, []byte(":"), 3)
		if len(parts) != 3 {
			continue
		}
		elems := bytes.Split(parts[2], []byte("/")) // elems[0] is "" (the root)
		for i, elem := range elems {
			walked, matched := false, false
			for _, rule := range s.rules.scopes {
				if !rule.name.Match(elem) {
					continue
				}
				matched = true
				if i >= 2 && i-1 <= s.rules.MaxDepth {
					if ok, _ := path.Match(rule.top, string(elems[1])); ok {
						walked = true
					}
				}
			}
			if matched {
				in = true
				if !walked {
					s.noteUnwalked(string(bytes.Join(elems[:i+1], []byte("/"))))
				}
				break
			}
		}
	}
	return in
}

// maxUnwalked bounds the unwalked cgroups remembered, so that each is
// told once.
const maxUnwalked = 4096

func (s *Scanner) noteUnwalked(cg string) {
	if _, ok := s.unwalkedSeen[cg]; ok || len(s.unwalkedSeen) >= maxUnwalked {
		return
	}
	s.unwalkedSeen[cg] = struct{}{}
	s.unwalked = append(s.unwalked, cg)
}

// Unwalked returns the container cgroups (by their /proc/PID/cgroup path)
// seen since the last call that hold a trusted process (ansible-runner,
// ansible-playbook) but lie where the scope rules do not look: under a
// top-level cgroup no rule names (podman's cgroup_parent, kind's
// kubelet.slice) or deeper than MaxDepth. Each is returned once in the
// Scanner's life; none of them is measured. The caller owns the slice.
func (s *Scanner) Unwalked() []string {
	out := s.unwalked
	s.unwalked = nil
	return out
}

// conmonArgs finds the container id (-c, --cid) and name (-n, --name) in
// conmon's command line, in the "-c ID", "--cid ID" and "--cid=ID" forms.
func conmonArgs(cmdline []byte) (cid, name []byte) {
	for rest := cmdline; len(rest) > 0; {
		var arg []byte
		arg, rest = nextArg(rest)
		key, val, hasVal := bytes.Cut(arg, []byte("="))
		var dst *[]byte
		switch string(key) {
		case "-c", "--cid":
			dst = &cid
		case "-n", "--name":
			dst = &name
		default:
			continue
		}
		if !hasVal {
			val, rest = nextArg(rest)
		}
		*dst = val
	}
	return cid, name
}
