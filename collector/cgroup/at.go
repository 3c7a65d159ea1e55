package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// DetectAt returns the layout of the cgroup hierarchies found in dir (the
// host's /sys/fs/cgroup, or where a container mounts the host's, e.g.
// /host/sys/fs/cgroup), read from the directory itself rather than from the
// calling process's mount table: the first cgroup mounts of a container's
// table are its own namespace's, not the host's. procRoot is the host's
// /proc (for finding a v1 cgroup's peers through a member process).
//
// dir holds cgroup v2 when it has cgroup.controllers; else v1 hierarchies
// in subdirectories named by controller (cpuacct, memory, pids; a
// combined "cpu,cpuacct" is found through its usual cpuacct symlink), and
// a hybrid host's v2 hierarchy in "unified". The layout only opens
// existing cgroups (Open): it knows no cgroup of the caller's, so Create
// and RemoveStale are not for it.
func DetectAt(dir, procRoot string) (*Layout, error) {
	l := &Layout{root: "/", v1: map[string]*mount{}, self: map[string]string{}}
	if filepath.Base(filepath.Clean(procRoot)) == "proc" {
		l.root = filepath.Dir(filepath.Clean(procRoot))
	}
	v2 := func(d string) bool {
		ctls, err := readFields(filepath.Join(d, "cgroup.controllers"))
		if err != nil {
			return false
		}
		l.v2 = &mount{dir: d, mountPoint: d, fsRoot: "/"}
		l.v2Available = ctls
		return true
	}
	if v2(dir) {
		return l, nil
	}
	for _, ctl := range append(slices.Clone(v1Controllers), "cpu") {
		d := filepath.Join(dir, ctl)
		if _, err := os.Stat(filepath.Join(d, "cgroup.procs")); err != nil {
			continue
		}
		l.v1[ctl] = &mount{dir: d, mountPoint: d, fsRoot: "/", controllers: []string{ctl}}
	}
	v2(filepath.Join(dir, "unified"))
	if len(l.v1) == 0 && l.v2 == nil {
		return nil, fmt.Errorf("%w: no cgroup hierarchy in %s", ErrNoCgroupFS, dir)
	}
	return l, nil
}
