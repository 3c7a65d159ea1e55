// Package cgroup owns Peakline's access to Linux control groups: it detects
// whether a host runs cgroup v1, v2 or a hybrid of both from
// /proc/self/mountinfo, creates and removes the cgroup a job runs in, moves
// processes into it, and reads the raw counters the live collector samples
// (CPU time, memory in use and its peak, process count).
//
// It does not sample on a schedule, compute percentages, attribute samples
// to tasks or ship anything: that is the collector's job. It uses the
// standard library only.
//
// Every path is resolved below a root directory, "/" on a real host, so that
// tests can point the package at a fake tree laid out like a v1, v2 or hybrid
// host (root/proc/self/mountinfo, root/proc/self/cgroup, root/sys/fs/cgroup/…).
package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Mode is the cgroup hierarchy the package uses for a job.
type Mode int

const (
	// ModeNone means no usable hierarchy was found.
	ModeNone Mode = iota
	// ModeV1 uses the v1 controllers cpuacct, memory and pids, each in its
	// own (or a shared) hierarchy. Hybrid hosts, whose cgroup2 mount carries
	// no controllers, use this mode.
	ModeV1
	// ModeV2 uses the unified hierarchy with the memory and pids
	// controllers (cpu.stat is always there on v2).
	ModeV2
)

func (m Mode) String() string {
	switch m {
	case ModeV1:
		return "v1"
	case ModeV2:
		return "v2"
	default:
		return "none"
	}
}

// Sentinel errors, for errors.Is.
var (
	// ErrNoCgroupFS means no cgroup file system is mounted at all.
	ErrNoCgroupFS = errors.New("no cgroup file system mounted")
	// ErrNoController means a controller the collector needs is not
	// mounted (v1) or not enabled (v2); the error text says what to do.
	ErrNoController = errors.New("cgroup controller missing")
	// ErrNotFound means an existing cgroup named by the caller does not exist.
	ErrNotFound = errors.New("cgroup not found")
)

// v1Controllers are the v1 controllers the collector reads, in the order
// the cgroups are created and written to.
var v1Controllers = []string{"memory", "pids", "cpuacct"}

// v2Controllers are the v2 controllers that must be enabled in the parent.
var v2Controllers = []string{"memory", "pids"}

// mount is one cgroup file system mount.
type mount struct {
	// dir is the mount point below the layout's root (host path
	// root+mountPoint).
	dir string
	// mountPoint is the mount point as the kernel reports it.
	mountPoint string
	// fsRoot is the cgroup path the mount shows at its mount point ("/"
	// except inside some containers).
	fsRoot string
	// controllers are the v1 controllers of the mount; empty for cgroup2.
	controllers []string
}

// Layout describes the cgroup mounts of a host and the cgroups the calling
// process is in. It is read once by Detect and is safe for concurrent use.
type Layout struct {
	root string
	// v2 is the cgroup2 mount, nil when absent.
	v2 *mount
	// v2Available are the controllers in the cgroup2 root's
	// cgroup.controllers (those bound to v2).
	v2Available []string
	// v1 maps a v1 controller name to its mount.
	v1 map[string]*mount
	// self maps a v1 controller name, or "" for v2, to the cgroup path of
	// the calling process in that hierarchy (as in /proc/self/cgroup).
	self map[string]string
}

// Detect reads root/proc/self/mountinfo and root/proc/self/cgroup. root is
// "/" (or "") on a real host, a fake tree's directory in tests.
func Detect(root string) (*Layout, error) {
	if root == "" {
		root = "/"
	}
	l := &Layout{root: root, v1: map[string]*mount{}, self: map[string]string{}}
	mi, err := os.ReadFile(filepath.Join(root, "proc/self/mountinfo"))
	if err != nil {
		return nil, fmt.Errorf("cannot read mount table: %w", err)
	}
	if err := l.parseMountinfo(mi); err != nil {
		return nil, err
	}
	if l.v2 == nil && len(l.v1) == 0 {
		return nil, fmt.Errorf("%w: neither cgroup nor cgroup2 in %s", ErrNoCgroupFS, filepath.Join(root, "proc/self/mountinfo"))
	}
	pc, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return nil, fmt.Errorf("cannot read own cgroups: %w", err)
	}
	l.parseProcCgroup(pc)
	if l.v2 != nil {
		b, err := os.ReadFile(filepath.Join(l.v2.dir, "cgroup.controllers"))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("cannot read cgroup2 controllers: %w", err)
		}
		l.v2Available = strings.Fields(string(b))
	}
	return l, nil
}

// parseMountinfo keeps the cgroup and cgroup2 mounts of a mountinfo file
// (proc(5): "id parent maj:min root mountpoint opts [optional…] - fstype
// source superopts").
func (l *Layout) parseMountinfo(b []byte) error {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		pf, af := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(af) < 1 {
			continue
		}
		fstype := af[0]
		if fstype != "cgroup" && fstype != "cgroup2" {
			continue
		}
		mp := unescapeMount(pf[4])
		m := &mount{dir: filepath.Join(l.root, mp), mountPoint: mp, fsRoot: unescapeMount(pf[3])}
		if fstype == "cgroup2" {
			// A later mount of the same kind hides an earlier one; keep
			// the first, which is the host's usual /sys/fs/cgroup(/unified).
			if l.v2 == nil {
				l.v2 = m
			}
			continue
		}
		if len(af) < 3 {
			continue
		}
		for _, opt := range strings.Split(af[2], ",") {
			switch opt {
			case "cpu", "cpuacct", "memory", "pids", "cpuset", "blkio", "devices", "freezer",
				"net_cls", "net_prio", "perf_event", "hugetlb", "rdma", "misc":
				m.controllers = append(m.controllers, opt)
			}
		}
		for _, c := range m.controllers {
			if _, dup := l.v1[c]; !dup {
				l.v1[c] = m
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("cannot parse mount table: %w", err)
	}
	return nil
}

// parseProcCgroup reads /proc/self/cgroup lines "id:controllers:path".
func (l *Layout) parseProcCgroup(b []byte) {
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			l.self[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c != "" {
				l.self[c] = parts[2]
			}
		}
	}
}

// unescapeMount decodes the octal escapes (\040 for a space) of mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Mode tells which hierarchy Create would use: v2 when the unified
// hierarchy carries memory and pids, else v1 when cpuacct, memory and pids
// are all mounted. When neither is usable, the error (ErrNoController)
// says what to mount or enable.
func (l *Layout) Mode() (Mode, error) {
	if l.v2 != nil && hasAll(l.v2Available, v2Controllers) {
		return ModeV2, nil
	}
	var missing []string
	for _, c := range v1Controllers {
		if l.v1[c] == nil {
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 {
		return ModeV1, nil
	}
	if len(l.v1) == 0 && l.v2 != nil {
		// A pure v2 host whose root lacks a controller: it is bound to
		// nothing or disabled at boot; v2 cannot enable it at the root.
		var lack []string
		for _, c := range v2Controllers {
			if !slices.Contains(l.v2Available, c) {
				lack = append(lack, c)
			}
		}
		return ModeNone, fmt.Errorf("%w: cgroup v2 controller(s) %s not available in %s: the kernel lacks them or they are disabled at boot (check cgroup_disable= on the kernel command line)",
			ErrNoController, strings.Join(lack, ", "), filepath.Join(l.v2.mountPoint, "cgroup.controllers"))
	}
	var how []string
	for _, c := range missing {
		how = append(how, fmt.Sprintf("mkdir -p /sys/fs/cgroup/%[1]s && mount -t cgroup -o %[1]s cgroup /sys/fs/cgroup/%[1]s", c))
	}
	return ModeNone, fmt.Errorf("%w: cgroup v1 controller(s) %s not mounted and no cgroup v2 hierarchy with memory and pids: mount them with '%s'",
		ErrNoController, strings.Join(missing, ", "), strings.Join(how, "; "))
}

// selfDir is the directory of the calling process's cgroup in mount m,
// whose key in /proc/self/cgroup is key ("" for v2).
func (l *Layout) selfDir(m *mount, key string) string {
	p, ok := l.self[key]
	if !ok {
		return m.dir
	}
	rel, ok := strings.CutPrefix(path.Clean(p), path.Clean(m.fsRoot))
	if !ok || strings.HasPrefix(p, "/..") {
		// The process sits outside what the mount shows (a cgroup
		// namespace or a bind mount): its cgroup is not reachable, use the
		// mount's top.
		return m.dir
	}
	return filepath.Join(m.dir, rel)
}

func hasAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// readFields reads a whitespace-separated control file such as
// cgroup.controllers.
func readFields(file string) ([]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(b)), nil
}
