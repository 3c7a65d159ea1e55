package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// noLimitV1 is where v1's memory.limit_in_bytes starts to mean "no
// limit": the kernel writes the largest page-aligned int64
// (9223372036854771712), and no machine has 2^62 bytes.
const noLimitV1 = 1 << 62

// MemoryLimit returns the memory limit the cgroup's processes live
// under, in bytes: the lowest of the cgroup's own limit and those of the
// cgroups above it (v2 memory.max, v1 memory.limit_in_bytes), 0 when
// there is none. The walk up stops where the limit file ends (the root
// of the hierarchy has none on v2).
func (c *Cgroup) MemoryLimit() (uint64, error) {
	name := "memory.limit_in_bytes"
	if c.mode == ModeV2 {
		name = "memory.max"
	}
	lowest := uint64(0)
	for dir := c.memDir; ; dir = filepath.Dir(dir) {
		v, err := readUint(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return 0, err
		}
		// v2 "max" reads as 0; v1 says "none" with a huge number.
		if v > 0 && v < noLimitV1 && (lowest == 0 || v < lowest) {
			lowest = v
		}
		if parent := filepath.Dir(dir); parent == dir {
			break
		}
	}
	return lowest, nil
}

// maxOOMDirs bounds the cgroups below a v1 job cgroup whose kills
// OOMKills sums: a container's cgroup has a child or two.
const maxOOMDirs = 256

// OOMKills returns how many processes of the cgroup the OOM killer
// killed since the cgroup was made: v2 oom_kill of memory.events, which
// counts kills in the cgroups below too; v1 the oom_kill of
// memory.oom_control (kernels ≥ 4.13), summed over the cgroup and those
// below it (at most maxOOMDirs), since v1 counts a kill only in the
// cgroup of the process killed (a container runtime's leaf below the
// scope found as the job's). ok is false when the kernel does not say
// (v1 before 4.13; memory.failcnt there counts the times usage hit the
// limit, which are no kills).
func (c *Cgroup) OOMKills() (kills uint64, ok bool, err error) {
	if c.mode == ModeV2 {
		return readOOMKill(filepath.Join(c.memDir, "memory.events"))
	}
	dirs := 0
	err = filepath.WalkDir(c.memDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == c.memDir {
				return err
			}
			return nil // a child removed while walked
		}
		if !d.IsDir() {
			return nil
		}
		if dirs++; dirs > maxOOMDirs {
			return filepath.SkipAll
		}
		n, found, err := readOOMKill(filepath.Join(p, "memory.oom_control"))
		if err != nil {
			if p != c.memDir && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		kills, ok = kills+n, ok || found
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	return kills, ok, nil
}

// readOOMKill reads the oom_kill line of a memory.events or
// memory.oom_control file; found is false when it has none.
func readOOMKill(file string) (kills uint64, found bool, err error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false, fmt.Errorf("cannot read %q: %w", file, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("oom_kill ")); ok {
			n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
			if err != nil {
				return 0, false, fmt.Errorf("cannot parse %q: %w", file, err)
			}
			return n, true, nil
		}
	}
	return 0, false, nil
}

// SetMemoryLimit limits the cgroup's memory to bytes: v2 memory.max (and
// memory.swap.max 0 where swap accounting is on), v1
// memory.limit_in_bytes (and memory.memsw.limit_in_bytes where swap is
// accounted), so that a job outgrowing it is OOM-killed as in a
// container with that limit, not swapped out.
func (c *Cgroup) SetMemoryLimit(bytes uint64) error {
	v := strconv.FormatUint(bytes, 10)
	if c.mode == ModeV2 {
		if err := writeControl(filepath.Join(c.memDir, "memory.max"), v); err != nil {
			return fmt.Errorf("set memory.max: %w", err)
		}
		if err := writeControl(filepath.Join(c.memDir, "memory.swap.max"), "0"); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("set memory.swap.max: %w", err)
		}
		return nil
	}
	if err := writeControl(filepath.Join(c.memDir, "memory.limit_in_bytes"), v); err != nil {
		return fmt.Errorf("set memory.limit_in_bytes: %w", err)
	}
	// memsw counts memory and swap together: the same figure allows no swap.
	if err := writeControl(filepath.Join(c.memDir, "memory.memsw.limit_in_bytes"), v); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("set memory.memsw.limit_in_bytes: %w", err)
	}
	return nil
}
