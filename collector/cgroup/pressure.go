package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Pressure is what a job and its node waited for, as cumulative counters
// from a fixed point (the kernel's creation of the counter, or the first
// read): a sampler takes the difference of two reads, so the share of an
// interval spent stalled is exact, not the kernel's moving average.
//
// A figure the kernel does not give is absent (its Has… false), never 0.
type Pressure struct {
	// CPUStall is the time at least one task of the job was runnable
	// but waiting for a CPU: v2 cpu.pressure "some" total. On v1, which
	// has no per-cgroup pressure, it is the run-queue wait
	// (/proc/TID/schedstat, second field) summed over the job's threads
	// as seen at each read: a thread that exits between two reads loses
	// its wait since the previous read, and threads waiting at once add
	// up; CPURun is then the CPU time of the same threads (first field),
	// so that a sampler can scale an interval's waits down to its wall
	// time by the threads' demand (wait + run).
	CPUStall    time.Duration
	HasCPUStall bool
	CPURun      time.Duration
	HasCPURun   bool
	// MemoryStall is the time at least one task of the job waited on
	// memory (reclaim, swap-in, refaults): v2 memory.pressure "some"
	// total. v1 has none.
	MemoryStall    time.Duration
	HasMemoryStall bool
	// Throttled is the time the CPU limit the job lives under held it
	// back: cpu.stat throttled_usec (v2) or throttled_time (v1, ns, of
	// the job's cgroup in the cpu hierarchy).
	Throttled    time.Duration
	HasThrottled bool
	// NodeCPUStall is the time at least one task on the node waited for
	// a CPU: /proc/pressure/cpu "some" total, on kernels with PSI.
	NodeCPUStall    time.Duration
	HasNodeCPUStall bool
	// NodeLoad is the node's 1-minute load average divided by its CPUs
	// (/proc/loadavg), read only where /proc/pressure/cpu is missing.
	NodeLoad    float64
	HasNodeLoad bool
}

// PSI is one pressure file (cpu.pressure, memory.pressure, io.pressure,
// /proc/pressure/*): the total stall time of its "some" and "full" lines.
// HasFull is false for a file without a full line (cpu.pressure of
// kernels before 5.13).
type PSI struct {
	Some, Full time.Duration
	HasFull    bool
}

// ParsePSI parses the text of a pressure file:
//
//	some avg10=0.00 avg60=0.00 avg300=0.00 total=12345
//	full avg10=0.00 avg60=0.00 avg300=0.00 total=6789
//
// total is in microseconds. A file without a "some" line with a total is
// an error.
func ParsePSI(b []byte) (PSI, error) {
	var p PSI
	haveSome := false
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) == 0 {
			continue
		}
		var total string
		for _, kv := range f[1:] {
			if v, ok := strings.CutPrefix(kv, "total="); ok {
				total = v
			}
		}
		if total == "" {
			return PSI{}, fmt.Errorf("cannot parse pressure line %q: no total=", line)
		}
		us, err := strconv.ParseUint(total, 10, 64)
		if err != nil {
			return PSI{}, fmt.Errorf("cannot parse pressure line %q: %w", line, err)
		}
		switch f[0] {
		case "some":
			p.Some, haveSome = time.Duration(us)*time.Microsecond, true
		case "full":
			p.Full, p.HasFull = time.Duration(us)*time.Microsecond, true
		}
	}
	if !haveSome {
		return PSI{}, errors.New("cannot parse pressure: no \"some\" line")
	}
	return p, nil
}

// ReadPSI reads and parses a pressure file. A missing file wraps
// fs.ErrNotExist; so does EOPNOTSUPP, which a kernel booted with psi=0
// answers when the file is read.
func ReadPSI(file string) (PSI, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		if isNotSupported(err) {
			return PSI{}, fmt.Errorf("cannot read %q: %w", file, fs.ErrNotExist)
		}
		return PSI{}, fmt.Errorf("cannot read %q: %w", file, err)
	}
	p, err := ParsePSI(b)
	if err != nil {
		return PSI{}, fmt.Errorf("%s: %w", file, err)
	}
	return p, nil
}

// ReadThrottled reads the throttled time of a cpu.stat file: v2
// throttled_usec, v1 throttled_time (ns). ok is false when the file or
// the field is missing (no CPU controller, or no limit support).
func ReadThrottled(file string) (d time.Duration, ok bool, err error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("cannot read %q: %w", file, err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		name, v, found := strings.Cut(line, " ")
		if !found || (name != "throttled_usec" && name != "throttled_time") {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("cannot parse %q: %s: %w", file, name, err)
		}
		if name == "throttled_usec" {
			return time.Duration(n) * time.Microsecond, true, nil
		}
		return time.Duration(n), true, nil
	}
	return 0, false, nil
}

// ReadLoadPerCPU reads the 1-minute load average of a /proc/loadavg file
// divided by cpus.
func ReadLoadPerCPU(file string, cpus int) (float64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, fmt.Errorf("cannot read %q: %w", file, err)
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("cannot parse %q: empty", file)
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("cannot parse %q: load %q", file, f[0])
	}
	return v / float64(max(cpus, 1)), nil
}

// readSchedstat returns the first two fields of a schedstat file: the
// time the task ran and the time it waited on a run queue, ns.
func readSchedstat(file string) (run, wait time.Duration, err error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, 0, fmt.Errorf("cannot parse %q: want 3 fields", file)
	}
	r, err1 := strconv.ParseUint(f[0], 10, 64)
	w, err2 := strconv.ParseUint(f[1], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, fmt.Errorf("cannot parse %q: %w", file, err)
	}
	return time.Duration(r), time.Duration(w), nil
}

func isNotSupported(err error) bool { return errors.Is(err, syscall.EOPNOTSUPP) }

// waitSum turns per-thread run-queue waits and run times into two
// cumulative counters.
type waitSum struct {
	last       map[int][2]time.Duration // run, wait
	run, total time.Duration
	// skipFirst: the first read only sets each thread's baseline (an
	// opened cgroup's threads may have waited long before the job).
	skipFirst, read bool
}

// add reads the schedstat of every thread in tids (below procDir) and
// adds what each waited since the previous read; a thread not seen
// before counts from its birth, except at a baseline read.
func (w *waitSum) add(procDir string, tids []int) {
	if w.last == nil {
		w.last = map[int][2]time.Duration{}
	}
	seen := make(map[int][2]time.Duration, len(tids))
	for _, tid := range tids {
		r, d, err := readSchedstat(filepath.Join(procDir, strconv.Itoa(tid), "schedstat"))
		if err != nil {
			continue // exited since the list was read
		}
		seen[tid] = [2]time.Duration{r, d}
		prev, known := w.last[tid]
		switch {
		case known && d >= prev[1] && r >= prev[0]:
			w.total += d - prev[1]
			w.run += r - prev[0]
		case !known && !(w.skipFirst && !w.read):
			w.total += d
			w.run += r
		}
	}
	w.last, w.read = seen, true
}

// Pressure reads the job's and the node's stall counters (see Pressure).
// Missing files leave their figure absent; other read errors are
// returned with what was read.
func (c *Cgroup) Pressure() (Pressure, error) {
	var p Pressure
	var errs []error
	root := c.root
	if root == "" {
		root = "/"
	}
	if c.mode == ModeV2 {
		if psi, err := ReadPSI(filepath.Join(c.cpuDir, "cpu.pressure")); err == nil {
			p.CPUStall, p.HasCPUStall = psi.Some, true
		} else if !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		if psi, err := ReadPSI(filepath.Join(c.memDir, "memory.pressure")); err == nil {
			p.MemoryStall, p.HasMemoryStall = psi.Some, true
		} else if !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	} else if tids, err := readPids(filepath.Join(c.cpuDir, "tasks")); err == nil {
		if c.waits == nil {
			c.waits = &waitSum{skipFirst: !c.owned}
		}
		c.waits.add(filepath.Join(root, "proc"), tids)
		p.CPUStall, p.HasCPUStall = c.waits.total, true
		p.CPURun, p.HasCPURun = c.waits.run, true
	} else if !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("cannot list threads of cgroup: %w", err))
	}
	if c.cpuCtlDir != "" {
		d, ok, err := ReadThrottled(filepath.Join(c.cpuCtlDir, "cpu.stat"))
		if err != nil {
			errs = append(errs, err)
		}
		p.Throttled, p.HasThrottled = d, ok
	}
	if psi, err := ReadPSI(filepath.Join(root, "proc/pressure/cpu")); err == nil {
		p.NodeCPUStall, p.HasNodeCPUStall = psi.Some, true
	} else if !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	} else if l, err := ReadLoadPerCPU(filepath.Join(root, "proc/loadavg"), runtime.NumCPU()); err == nil {
		p.NodeLoad, p.HasNodeLoad = l, true
	} else if !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	return p, errors.Join(errs...)
}
