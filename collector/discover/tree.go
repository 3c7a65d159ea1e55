package discover

import (
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
// trusted processes whose environment has JobIDEnv=<id>, and all their
// descendants. It offers the reads of collector/cgroup's Cgroup (CPU,
// Memory, PIDs, Populated), with the same meaning as far as /proc allows:
//
//   - CPU is the sum of utime+stime of the live processes of the tree
//     plus cutime+cstime (the children they reaped). A member that exits
//     while its parent is a member is reaped into the parent's cutime; one
//     whose parent is not (the tree's roots, daemons reparented to init)
//     keeps the time it had at the last read. What such a process used
//     between the last read and its exit, and what the children of a
//     parent that does not wait for them used, is lost. The counter
//     never goes backwards.
//   - Memory is the sum of the members' resident set sizes. Pages shared
//     between processes (the Python interpreter's, copy-on-write pages
//     after fork) count once per process, so it overstates what a cgroup
//     would charge; page cache is not counted at all.
//   - PIDs is the number of tasks (threads) of the members, zombies
//     included, as the pids controller counts them.
//
// Peaks are the highest values seen at the reads since the previous call:
// what happened between two reads is not seen.
//
// Each read looks at /proc afresh when the same read was already made
// since the last look, so new children count and one sampler tick (CPU,
// Memory, PIDs) costs one pass over /proc. A member stays one while it
// lives, even when reparented. Safe for concurrent use (a sampler and
// the caller's Populated check may run at once).
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
	cache   map[int]*cachedProc
	members map[int]member
	envSeen map[procID]int64 // trusted processes' job ids, read once

	exitedTicks uint64 // time of members that exited unreaped by a member
	cpuTicks    uint64 // the last CPU value: never less
	memBytes    uint64
	tasks       uint64
	alive       bool
	memPeak     uint64 // highest since the last Memory call
	taskPeak    uint64 // highest since the last PIDs call
	used        uint8  // reads made since the last pass
	scanned     bool
}

type procID struct {
	pid   int
	start uint64
}

type treeProc struct {
	procStat
	trusted bool
	full    bool // read now, not taken from the cache
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
	if c != nil && c.start == st.start && c.comm == string(comm) {
		c.stable++
		c.ppid = st.ppid
	} else {
		c = &cachedProc{start: st.start, ppid: st.ppid, comm: string(comm)}
		trusted, python := t.rules.trustedComm(comm)
		if !trusted && python {
			trusted = trustedCmdline(&t.r, t.rules, t.procRoot+"/"+strconv.Itoa(pid)+"/cmdline")
		}
		c.trusted = trusted
		t.cache[pid] = c
	}
	c.gen = t.gen
	return treeProc{procStat: st, trusted: c.trusted, full: true}, true
}

type member struct {
	start uint64
	ppid  int
	ticks uint64 // utime+stime+cutime+cstime at the last pass
}

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
		snap: map[int]treeProc{}, members: map[int]member{}, envSeen: map[procID]int64{},
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
	t.scanned = true
	clear(t.snap)
	for _, pid := range t.pidBuf {
		if _, member := t.members[pid]; !member {
			if c := t.cache[pid]; c != nil && c.stable >= stableAfter {
				t.snap[pid] = treeProc{procStat: procStat{ppid: c.ppid, start: c.start}, trusted: c.trusted}
				c.gen = t.gen
				continue
			}
		}
		p, ok := t.readProc(pid)
		if !ok {
			continue // gone between the listing and the read, or not readable
		}
		t.snap[pid] = p
	}
	for pid, c := range t.cache {
		if c.gen != t.gen {
			delete(t.cache, pid)
		}
	}

	// Members that left: count their time unless a member reaps them.
	for pid, m := range t.members {
		if p, ok := t.snap[pid]; ok && p.start == m.start {
			continue
		}
		if parent, ok := t.members[m.ppid]; ok {
			if pp, alive := t.snap[m.ppid]; alive && pp.start == parent.start {
				delete(t.members, pid)
				continue
			}
		}
		t.exitedTicks += m.ticks
		delete(t.members, pid)
	}
	// Roots: trusted processes whose environment names the job.
	for pid, p := range t.snap {
		if !p.trusted {
			continue
		}
		if _, ok := t.members[pid]; ok {
			continue
		}
		id := procID{pid, p.start}
		jobID, seen := t.envSeen[id]
		if !seen {
			jobID, _ = environIDs(&t.r, t.rules, t.procRoot+"/"+strconv.Itoa(pid)+"/environ", false)
			t.envSeen[id] = jobID
		}
		if jobID == t.jobID {
			t.members[pid] = member{start: p.start}
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
				t.members[pid] = member{start: p.start}
				grew = true
			}
		}
	}

	var ticks, pages, tasks uint64
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
		m.ticks = p.utime + p.stime + p.cutime + p.cstime
		t.members[pid] = m
		ticks += m.ticks
		pages += p.rssPages
		tasks += p.threads
		if p.state != 'Z' && p.state != 'X' {
			t.alive = true
		}
	}
	t.cpuTicks = max(t.cpuTicks, t.exitedTicks+ticks)
	t.memBytes = pages * t.pageSize
	t.tasks = tasks
	t.memPeak = max(t.memPeak, t.memBytes)
	t.taskPeak = max(t.taskPeak, t.tasks)
	return nil
}
