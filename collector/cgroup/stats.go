package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroup2Magic is the cgroup2 file system magic number (statfs(2)).
const (
	cgroup2Magic = 0x63677270
)

// CPU returns the CPU time all tasks of the cgroup used since it was
// created: v1 cpuacct.usage, v2 usage_usec of cpu.stat.
func (c *Cgroup) CPU() (time.Duration, error) {
	if c.mode == ModeV2 {
		file := filepath.Join(c.cpuDir, "cpu.stat")
		b, err := os.ReadFile(file)
		if err != nil {
			return 0, fmt.Errorf("cannot read %q: %w", file, err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
				us, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				if err != nil {
					return 0, fmt.Errorf("cannot parse %q: %w", file, err)
				}
				return time.Duration(us) * time.Microsecond, nil
			}
		}
		return 0, fmt.Errorf("cannot parse %q: no usage_usec", file)
	}
	ns, err := readUint(filepath.Join(c.cpuDir, "cpuacct.usage"))
	return time.Duration(ns), err
}

// Memory returns the memory in use by the cgroup in bytes (v1
// memory.usage_in_bytes, v2 memory.current) and the highest usage the
// kernel saw since the previous call, or 0 when that is not known.
//
// The peak comes from memory.peak (v2) or memory.max_usage_in_bytes (v1).
// For a cgroup made by Create it is reset after each read (v2: through a
// file descriptor of its own, kernels ≥ 6.12; v1: by writing 0), so it
// covers exactly the time since the previous call. Otherwise the
// all-time peak counts only when it rose since the previous call, which
// still catches every new high-water mark.
func (c *Cgroup) Memory() (current, peakSinceLast uint64, err error) {
	name := "memory.usage_in_bytes"
	if c.mode == ModeV2 {
		name = "memory.current"
	}
	// Peak first: a spike right before the current read is still counted.
	if c.memPeak != nil {
		peakSinceLast, err = c.memPeak.sinceLast()
		if err != nil {
			return 0, 0, err
		}
	}
	current, err = readUint(filepath.Join(c.memDir, name))
	return current, peakSinceLast, err
}

// PIDs returns the number of tasks in the cgroup (pids.current) and the
// all-time pids.peak when it rose since the previous call, else 0.
func (c *Cgroup) PIDs() (current, peakSinceLast uint64, err error) {
	if c.pidsPeak != nil {
		peakSinceLast, err = c.pidsPeak.sinceLast()
		if err != nil {
			return 0, 0, err
		}
	}
	current, err = readUint(filepath.Join(c.pidsDir, "pids.current"))
	return current, peakSinceLast, err
}

func (c *Cgroup) initPeaks() {
	if c.mode == ModeV2 {
		// Per-descriptor resets touch nobody else's view, so opened
		// cgroups use them too; a fake tree in tests is no cgroupfs.
		c.memPeak = newPeakReader(filepath.Join(c.memDir, "memory.peak"), onFS(c.memDir, cgroup2Magic), false, !c.owned)
	} else {
		// Writing 0 resets the peak for every reader: only in our own cgroup.
		c.memPeak = newPeakReader(filepath.Join(c.memDir, "memory.max_usage_in_bytes"), false, c.owned, !c.owned)
	}
	c.pidsPeak = newPeakReader(filepath.Join(c.pidsDir, "pids.peak"), false, false, !c.owned)
}

func (c *Cgroup) close() {
	for _, p := range []*peakReader{c.memPeak, c.pidsPeak} {
		if p != nil && p.f != nil {
			_ = p.f.Close()
			p.f = nil
		}
	}
}

// peakReader turns an all-time peak file into "peak since last read".
type peakReader struct {
	file string
	// f is set when the file is reset per file descriptor (v2
	// memory.peak on kernels ≥ 6.12): pread the peak, then write to reset.
	f *os.File
	// resetZero: write "0" to reset (v1 memory.max_usage_in_bytes).
	resetZero bool
	// last is the all-time peak at the previous read (delta mode).
	last      uint64
	haveLast  bool
	skipFirst bool
	missing   bool
}

// newPeakReader reads file as an all-time peak. fdLocal tries the
// per-descriptor reset; resetZero resets by writing 0; skipFirst makes the
// first read a baseline only (delta mode on an opened cgroup).
func newPeakReader(file string, fdLocal, resetZero, skipFirst bool) *peakReader {
	p := &peakReader{file: file, resetZero: resetZero, skipFirst: skipFirst}
	if _, err := os.Stat(file); err != nil {
		p.missing = true
		return p
	}
	if fdLocal {
		f, err := os.OpenFile(file, os.O_RDWR, 0)
		if err == nil {
			if _, err := f.Write([]byte("reset\n")); err == nil {
				p.f = f
			} else {
				_ = f.Close() // an older kernel: memory.peak is read-only
			}
		}
	}
	return p
}

// sinceLast returns the peak since the previous call, or 0 when unknown.
func (p *peakReader) sinceLast() (uint64, error) {
	if p.missing {
		return 0, nil
	}
	if p.f != nil {
		buf := make([]byte, 64)
		n, err := p.f.ReadAt(buf, 0)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("cannot read %q: %w", p.file, err)
		}
		v, err := parseUint(p.file, buf[:n])
		if err != nil {
			return 0, err
		}
		if _, err := p.f.Write([]byte("reset\n")); err != nil {
			return 0, fmt.Errorf("cannot reset %q: %w", p.file, err)
		}
		return v, nil
	}
	v, err := readUint(p.file)
	if errors.Is(err, fs.ErrNotExist) {
		p.missing = true
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if p.resetZero {
		if err := writeControl(p.file, "0"); err != nil {
			return 0, fmt.Errorf("cannot reset %q: %w", p.file, err)
		}
		return v, nil
	}
	// Delta mode: for an opened cgroup the first read only sets the
	// baseline, as its all-time peak may be old; a created one starts empty.
	if !p.haveLast {
		p.last, p.haveLast = v, true
		if p.skipFirst {
			return 0, nil
		}
		return v, nil
	}
	if v <= p.last {
		return 0, nil
	}
	p.last = v
	return v, nil
}

func onFS(dir string, magic int64) bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return false
	}
	return int64(st.Type) == magic
}

func readUint(file string) (uint64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, fmt.Errorf("cannot read %q: %w", file, err)
	}
	return parseUint(file, b)
}

func parseUint(file string, b []byte) (uint64, error) {
	s := string(bytes.TrimSpace(b))
	if s == "max" {
		return 0, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cannot parse %q: %w", file, err)
	}
	return v, nil
}
