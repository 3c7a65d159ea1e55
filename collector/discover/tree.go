package discover

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"
)

// clockTick is the unit of the times in /proc/<pid>/stat: USER_HZ, which
// Linux fixes at 100 for user space whatever the kernel's HZ.
const clockTick = time.Second / 100

// Tree measures a job that has no cgroup of its own from /proc: the
// children of the conmon that monitors its container (conmon's -n names
// ansible_runner_<id>: world-readable, as podman runs even a container
// with no cgroup of its own), the trusted processes whose environment has
// JobIDEnv=<id>, and all their descendants. It offers the reads of collector/cgroup's Cgroup (CPU,
// Memory, PIDs, Populated), with the same meaning as far as /proc allows:
//
//   - CPU is a counter of the time the members used, added up pass by
//     pass (a pass is one look at /proc): at the first pass, what the
//     members had used so far, own (utime+stime) and of the children
//     they reaped (cutime+cstime), as a cgroup's counter holds its
//     history; then at each pass, what each member's own and reaped
//     time grew by since the previous pass. A member joining the tree
//     counts its whole time only when it was born after the previous
//     pass (it was not there then); one that was there (a trusted
//     process found late, one that exec'd into a trusted name, one
//     reparented into the tree) counts from the time it joins, so the
//     time it used before never lands in one interval. A member that
//     leaves is reaped into its nearest live member ancestor's cutime
//     (its parent's, or through parents that left in the same interval):
//     the time already counted for it is taken off that ancestor's next
//     cutime growth (during this pass and the next, for a parent read
//     just before it reaped), so it counts once.
//     The counter never goes backwards, and over a pass it grows by no
//     more than the members used since the previous pass, save the
//     rounding of /proc's times: up to one clock tick (10 ms) per
//     process that ran. A member's time shows at the pass after it used
//     it, save what it used between its last pass and its exit, which
//     shows at the pass that sees its reaper's cutime (the next one).
//     What it misses: what a member used between the last pass and its
//     exit when nothing in the tree reaps it (a root, whose parent is no
//     member; a daemon reparented to init; the children of a parent that
//     ignores SIGCHLD); what a process that execs into a trusted name or
//     is adopted by a member after it stayed the same for stableAfter
//     passes uses before it is read again (up to recheckEvery passes);
//     and, when a member and its parent both leave within one interval
//     with the child reparented (to init) first, up to the child's
//     counted time of what the ancestor's reaped children used in that
//     pass and the next (the child is taken for reaped by the ancestor).
//   - Memory is the sum of the members' resident set sizes. Pages shared
//     between processes (the Python interpreter's, copy-on-write pages
//     after fork) count once per process, so it overstates what a cgroup
//     would charge; page cache is not counted at all. A child between
//     vfork and exec (Python's subprocess, posix_spawn) shows its
//     parent's resident set as its own and counts it again, for the
//     moment that lasts.
//   - PIDs is the number of tasks (threads) of the members, zombies
//     included, as the pids controller counts them.
//
// Peaks are the highest values seen at the reads since the previous call:
// what happened between two reads is not seen.
//
// Each read looks at /proc afresh when the same read was already made
// since the last look, so new children count and one sampler tick (CPU,
// Memory, PIDs) costs one pass over /proc. A member stays one while it
// lives, even when reparented. A process that is no member and kept its
// name for stableAfter passes is read again only every recheckEvery
// passes (to see it exec into a trusted name or get adopted by a
// member). Safe for concurrent use (a sampler and the caller's Populated
// check may run at once).
type Tree struct {
	mu       sync.Mutex
	procRoot string
	jobID    int64
	rules    *compiled
	pageSize uint64

	r       fileReader
	pidBuf  []int
	gen     uint64
	snap    map[int]treeProc // this pass's processes
	prev    map[int]treeProc // the previous pass's
	cache   map[int]*cachedProc
	members map[int]member
	envSeen map[procID]int64 // trusted processes' job ids, read once

	cpuTicks uint64 // the CPU counter (see Tree)
	memBytes uint64
	tasks    uint64
	alive    bool
	memPeak  uint64 // highest since the last Memory call
	taskPeak uint64 // highest since the last PIDs call
	used     uint8  // reads made since the last pass
	scanned  bool
}

type procID struct {
	pid   int
	start uint64
}

type treeProc struct {
	procStat
	trusted bool
	full    bool // read now, not taken from the cache
	seq     int  // the order in which the pass read it
}

// cachedProc is what a pass keeps of a process that is no member: its
// parent, identity and whether it is trusted. Once its comm has stayed
// the same for stableAfter passes it is not read again while it lives.
type cachedProc struct {
	gen     uint64
	start   uint64
	ppid    int
	trusted bool
	comm    string
	stable  int
	// conmonJob is, for a conmon process, the job its container name
	// (-n ansible_runner_<id>) says; 0 for any other process.
	conmonJob int64
	// again marks a process caught in an exec (errExecing): read anew
	// at the next look.
	again bool
}

// readProc reads a process's stat (and, for a Python interpreter, its
// cmdline) and updates its cache entry.
func (t *Tree) readProc(pid int) (treeProc, bool) {
	b, err := t.r.read(t.procRoot + "/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return treeProc{}, false
	}
	st, comm, ok := parseStat(b)
	if !ok {
		return treeProc{}, false
	}
	c := t.cache[pid]
	if c != nil && c.start == st.start && c.comm == string(comm) && !c.again {
		c.stable++
		c.ppid = st.ppid
	} else {
		stable := 0
		if c != nil && c.start == st.start && c.comm == string(comm) {
			stable = c.stable + 1
		}
		c = &cachedProc{start: st.start, ppid: st.ppid, comm: string(comm), stable: stable}
		trusted, python := t.rules.trustedComm(comm)
		var err error
		if !trusted && python {
			trusted, err = trustedCmdline(&t.r, t.rules, t.procRoot+"/"+strconv.Itoa(pid)+"/cmdline")
		}
		c.trusted = trusted
		if t.rules.ConmonComm != "" && string(comm) == t.rules.ConmonComm {
			var b []byte
			if b, err = t.r.readArgs(t.procRoot + "/" + strconv.Itoa(pid) + "/cmdline"); err == nil {
				if _, name := conmonArgs(b); name != nil {
					if m := t.rules.conmonName.FindSubmatch(name); m != nil {
						c.conmonJob, _ = parseJobID(m[1])
					}
				}
			}
		}
		c.again = errors.Is(err, errExecing)
		t.cache[pid] = c
	}
	c.gen = t.gen
	return treeProc{procStat: st, trusted: c.trusted, full: true}, true
}

type member struct {
	start uint64
	ppid  int
	// own (utime+stime) and reaped (cutime+cstime) are the highest
	// values read: the time counted up to them. joined marks a member
	// that joined at this pass and has none yet.
	own, reaped uint64
	joined      bool
	// credit is the counted time of members that left and that this
	// member (or a child of it that left too) reaped: its reaped time
	// grows by it without anything new being used. It is taken off
	// that growth during creditPasses more passes, then dropped.
	credit       uint64
	creditPasses uint8
}

// recheckEvery is how often (in passes) a stable process that is no
// member is read again: at 4 Hz, every 16 s. Each pass then reads 1/64
// of the host's stable processes.
const recheckEvery = 64

const (
	readCPU uint8 = 1 << iota
	readMemory
	readPIDs
	readPopulated
)

// NewTree returns the process tree of AWX job jobID below procRoot
// (/proc). It reads nothing yet.
func NewTree(procRoot string, jobID int64, rules Rules) (*Tree, error) {
	if jobID <= 0 {
		return nil, fmt.Errorf("process tree: job id %d must be positive", jobID)
	}
	c, err := rules.compile()
	if err != nil {
		return nil, err
	}
	return &Tree{
		procRoot: procRoot, jobID: jobID, rules: c, pageSize: uint64(os.Getpagesize()),
		snap: map[int]treeProc{}, prev: map[int]treeProc{}, members: map[int]member{}, envSeen: map[procID]int64{},
		cache: map[int]*cachedProc{},
	}, nil
}

// JobID is the AWX job id the tree follows.
func (t *Tree) JobID() int64 { return t.jobID }

// refresh looks at /proc again when read was already made since the
// last look. The caller holds t.mu.
func (t *Tree) refresh(read uint8) error {
	if !t.scanned || t.used&read != 0 {
		if err := t.pass(); err != nil {
			return err
		}
		t.used = 0
	}
	t.used |= read
	return nil
}

// CPU returns the CPU time the job's processes used (see Tree).
func (t *Tree) CPU() (time.Duration, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.refresh(readCPU); err != nil {
		return 0, err
	}
	return time.Duration(t.cpuTicks) * clockTick, nil
}

// Memory returns the resident memory of the job's processes in bytes and
// the highest sum seen since the previous call.
func (t *Tree) Memory() (current, peakSinceLast uint64, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.refresh(readMemory); err != nil {
		return 0, 0, err
	}
	peak := t.memPeak
	t.memPeak = 0
	return t.memBytes, peak, nil
}

// PIDs returns the number of tasks (threads) of the job's processes and
// the highest number seen since the previous call.
func (t *Tree) PIDs() (current, peakSinceLast uint64, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.refresh(readPIDs); err != nil {
		return 0, 0, err
	}
	peak := t.taskPeak
	t.taskPeak = 0
	return t.tasks, peak, nil
}

// Populated reports whether a process of the job is alive (not a zombie).
// Before the first trusted process appears, and after the last one and
// its descendants are gone, it is false.
func (t *Tree) Populated() (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.refresh(readPopulated); err != nil {
		return false, err
	}
	return t.alive, nil
}

// Procs returns the members' pids at the last look, ascending.
func (t *Tree) Procs() []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	pids := make([]int, 0, len(t.members))
	for pid := range t.members {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	return pids
}

// pass reads /proc once and updates the members and the counters.
func (t *Tree) pass() error {
	var err error
	t.gen++
	t.pidBuf, err = t.r.pids(t.procRoot, t.pidBuf)
	if err != nil {
		return fmt.Errorf("list processes in %q: %w", t.procRoot, err)
	}
	slices.Sort(t.pidBuf) // /proc lists in order already: parents before children but after a pid wrap
	first := !t.scanned
	t.scanned = true
	t.prev, t.snap = t.snap, t.prev
	clear(t.snap)
	var later []int // read before their parent
	for i, pid := range t.pidBuf {
		if _, member := t.members[pid]; !member {
			if c := t.cache[pid]; c != nil && c.stable >= stableAfter && (pid+int(t.gen))%recheckEvery != 0 {
				t.snap[pid] = treeProc{procStat: procStat{ppid: c.ppid, start: c.start}, trusted: c.trusted, seq: i}
				c.gen = t.gen
				continue
			}
		}
		p, ok := t.readProc(pid)
		if !ok {
			continue // gone between the listing and the read, or not readable
		}
		p.seq = i
		t.snap[pid] = p
		if p.ppid > pid {
			later = append(later, pid)
		}
	}
	// A process read before its parent may have been reaped in between,
	// its time then in both its own reading and its parent's cutime:
	// read it again after its parent.
	for _, pid := range later {
		if pp, ok := t.snap[t.snap[pid].ppid]; !ok || pp.seq < t.snap[pid].seq {
			continue
		}
		seq := t.snap[pid].seq
		p, ok := t.readProc(pid)
		if !ok || p.start != t.snap[pid].start {
			delete(t.snap, pid)
			continue
		}
		p.seq = seq
		t.snap[pid] = p
	}
	for pid, c := range t.cache {
		if c.gen != t.gen {
			delete(t.cache, pid)
		}
	}

	t.leave()
	// Roots: the children of the conmon whose container name names the
	// job (world-readable), and trusted processes whose environment
	// names it.
	for pid, p := range t.snap {
		if _, ok := t.members[pid]; ok {
			continue
		}
		if c := t.cache[p.ppid]; c != nil && c.conmonJob == t.jobID {
			t.members[pid] = member{start: p.start, joined: true}
			continue
		}
		if !p.trusted {
			continue
		}
		id := procID{pid, p.start}
		jobID, seen := t.envSeen[id]
		if !seen {
			var err error
			jobID, _, err = environIDs(&t.r, t.rules, t.procRoot+"/"+strconv.Itoa(pid)+"/environ", false)
			if !errors.Is(err, errExecing) {
				t.envSeen[id] = jobID // else read again at the next look
			}
		}
		if jobID == t.jobID {
			t.members[pid] = member{start: p.start, joined: true}
		}
	}
	for id := range t.envSeen {
		if p, ok := t.snap[id.pid]; !ok || p.start != id.start {
			delete(t.envSeen, id)
		}
	}
	// Descendants, to a fixed point (each round adds one generation).
	for grew := true; grew; {
		grew = false
		for pid, p := range t.snap {
			if _, ok := t.members[pid]; ok {
				continue
			}
			if _, ok := t.members[p.ppid]; ok {
				t.members[pid] = member{start: p.start, joined: true}
				grew = true
			}
		}
	}

	var used, pages, tasks uint64
	t.alive = false
	for pid, m := range t.members {
		p := t.snap[pid]
		if !p.full {
			// It became a member at this pass (a new root) from the
			// cache, which keeps no times: read them.
			var ok bool
			if p, ok = t.readProc(pid); !ok {
				delete(t.members, pid)
				continue
			}
		}
		m.ppid = p.ppid
		used += m.count(p, first || !t.wasThere(pid, p.start))
		t.members[pid] = m
		pages += p.rssPages
		tasks += p.threads
		if p.state != 'Z' && p.state != 'X' {
			t.alive = true
		}
	}
	t.cpuTicks += used
	t.memBytes = pages * t.pageSize
	t.tasks = tasks
	t.memPeak = max(t.memPeak, t.memBytes)
	t.taskPeak = max(t.taskPeak, t.tasks)
	return nil
}

// wasThere reports whether the previous pass saw the process.
func (t *Tree) wasThere(pid int, start uint64) bool {
	p, ok := t.prev[pid]
	return ok && p.start == start
}

// leave removes the members that are gone (or whose pid is another
// process's now) and credits each one's counted time to its nearest live
// member ancestor, whose cutime its reaping grows by that much.
func (t *Tree) leave() {
	var gone []int
	for pid, m := range t.members {
		if p, ok := t.snap[pid]; !ok || p.start != m.start {
			gone = append(gone, pid)
		}
	}
	for _, pid := range gone {
		m := t.members[pid]
		a := m.ppid
		for range len(t.members) { // a bound against a cycle of stale ppids
			am, ok := t.members[a]
			if !ok {
				break // no member reaps it: its time stays as counted
			}
			if p, ok := t.snap[a]; ok && p.start == am.start {
				am.credit += m.own + m.reaped
				am.creditPasses = 2
				t.members[a] = am
				break
			}
			a = am.ppid
		}
	}
	for _, pid := range gone {
		delete(t.members, pid)
	}
}

// count updates m from its stat p and returns the time to add to the
// counter: all of it for a member that joined new (born since the
// previous pass), none for one that joined with a past, else what its
// own and reaped time grew by, less the credit of members it reaped.
func (m *member) count(p treeProc, isNew bool) uint64 {
	own, reaped := p.utime+p.stime, p.cutime+p.cstime
	if m.joined {
		m.joined = false
		m.own, m.reaped = own, reaped
		if isNew {
			return own + reaped
		}
		return 0
	}
	var used uint64
	if own > m.own {
		used += own - m.own
		m.own = own
	}
	if m.creditPasses == 0 {
		m.credit = 0
	}
	if reaped > m.reaped {
		grew := reaped - m.reaped
		m.reaped = reaped
		take := min(grew, m.credit)
		m.credit -= take
		used += grew - take
	}
	if m.creditPasses > 0 {
		m.creditPasses--
	}
	return used
}
