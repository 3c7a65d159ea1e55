package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Cgroup is one job's cgroup: a directory per hierarchy it spans (one on
// v2; up to three on v1, where cpuacct, memory and pids may be mounted
// apart). A Cgroup is not safe for concurrent use: the sampler owns it.
type Cgroup struct {
	mode  Mode
	owned bool // created by Create: Remove deletes it and peaks may be reset
	// dirs are the distinct directories; homes[i] is where processes left
	// in dirs[i] go back to on Remove (the creator's own cgroup).
	dirs, homes             []string
	cpuDir, memDir, pidsDir string
	// cpuCtlDir holds the cpu.stat with the throttling of the CPU limit
	// the job lives under: the cgroup itself on v2; on v1 its cgroup in
	// the cpu hierarchy ("" when that is not mounted).
	cpuCtlDir string
	// root is the layout's root, where /proc is read.
	root string

	memPeak, pidsPeak *peakReader
	waits             *waitSum // v1 run-queue waits (Pressure)
}

// Mode is the hierarchy the cgroup lives in.
func (c *Cgroup) Mode() Mode { return c.mode }

// Path is the cgroup's directory: on v1 the one in the memory hierarchy.
// Open accepts it.
func (c *Cgroup) Path() string { return c.memDir }

// Dirs are the cgroup's directories, one per hierarchy. The caller must not
// modify the slice.
func (c *Cgroup) Dirs() []string { return c.dirs }

// Create makes a fresh cgroup called name for a job and returns it; Remove
// deletes it.
//
// On v1 it is created under the caller's own cgroup in each of the cpuacct,
// memory and pids hierarchies, so the limits the caller lives under apply to
// the job too. On v2 a non-root cgroup that holds processes cannot give
// controllers to children, so the job's cgroup is made beside the caller's
// own one (its parent already delegates memory and pids, or the caller's
// cgroup would not have them), or under the root when the caller is there.
// When a controller is missing, the error wraps ErrNoController and says
// which cgroup.subtree_control to write.
func (l *Layout) Create(name string) (*Cgroup, error) {
	if name == "" || strings.ContainsAny(name, "/\n") || name == "." || name == ".." {
		return nil, fmt.Errorf("cannot create cgroup %q: the name must be one path element", name)
	}
	mode, err := l.Mode()
	if err != nil {
		return nil, err
	}
	c := &Cgroup{mode: mode, owned: true, root: l.root}
	if mode == ModeV2 {
		parent, home, err := l.v2Parent()
		if err != nil {
			return nil, err
		}
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, fmt.Errorf("cannot create cgroup %q: %w", dir, mkdirHint(err))
		}
		c.dirs, c.homes = []string{dir}, []string{home}
		c.cpuDir, c.memDir, c.pidsDir, c.cpuCtlDir = dir, dir, dir, dir
		if have, err := readFields(filepath.Join(dir, "cgroup.controllers")); err == nil && !hasAll(have, v2Controllers) {
			_ = os.Remove(dir)
			return nil, fmt.Errorf("%w: cgroup %q got controllers %q: enable memory and pids with 'echo \"+memory +pids\" > %s'",
				ErrNoController, l.shown(dir), have, l.shown(filepath.Join(parent, "cgroup.subtree_control")))
		}
	} else {
		for _, ctl := range v1Controllers {
			m := l.v1[ctl]
			home := l.selfDir(m, ctl)
			dir := filepath.Join(home, name)
			if !slices.Contains(c.dirs, dir) {
				if err := os.Mkdir(dir, 0o755); err != nil {
					_ = c.Remove()
					return nil, fmt.Errorf("cannot create cgroup %q: %w", dir, mkdirHint(err))
				}
				c.dirs, c.homes = append(c.dirs, dir), append(c.homes, home)
			}
			c.setV1Dir(ctl, dir)
		}
		// The job runs under its creator's cpu cgroup and its limit.
		if m := l.v1["cpu"]; m != nil {
			c.cpuCtlDir = l.selfDir(m, "cpu")
		}
	}
	c.initPeaks()
	return c, nil
}

// v2Parent picks the directory the job's cgroup is made in and the
// directory leftover processes return to (the caller's own cgroup).
func (l *Layout) v2Parent() (parent, home string, err error) {
	self := l.selfDir(l.v2, "")
	if filepath.Clean(self) == filepath.Clean(l.v2.dir) {
		// The root is exempt from the no-internal-process rule: enable
		// the controllers there if needed.
		return self, self, l.ensureSubtree(self)
	}
	have, err := readFields(filepath.Join(self, "cgroup.controllers"))
	if err != nil {
		return "", "", fmt.Errorf("cannot read controllers of own cgroup: %w", err)
	}
	if hasAll(have, v2Controllers) {
		return filepath.Dir(self), self, nil
	}
	// Say which ancestors must delegate the controllers, top down.
	var cmds []string
	for dir := filepath.Dir(self); ; dir = filepath.Dir(dir) {
		sub, _ := readFields(filepath.Join(dir, "cgroup.subtree_control"))
		var lack []string
		for _, c := range v2Controllers {
			if !slices.Contains(sub, c) {
				lack = append(lack, "+"+c)
			}
		}
		if len(lack) > 0 {
			cmds = append(cmds, fmt.Sprintf("echo %q > %s", strings.Join(lack, " "), l.shown(filepath.Join(dir, "cgroup.subtree_control"))))
		}
		if filepath.Clean(dir) == filepath.Clean(l.v2.dir) || len(dir) <= len(l.v2.dir) {
			break
		}
	}
	slices.Reverse(cmds)
	return "", "", fmt.Errorf("%w: own cgroup %q lacks memory or pids (has %q): enable them with '%s'",
		ErrNoController, l.shown(self), have, strings.Join(cmds, "; "))
}

// ensureSubtree enables memory and pids in dir's cgroup.subtree_control.
func (l *Layout) ensureSubtree(dir string) error {
	file := filepath.Join(dir, "cgroup.subtree_control")
	have, err := readFields(file)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cannot read %q: %w", file, err)
	}
	var add []string
	for _, c := range v2Controllers {
		if !slices.Contains(have, c) {
			add = append(add, "+"+c)
		}
	}
	if len(add) == 0 {
		return nil
	}
	if err := os.WriteFile(file, []byte(strings.Join(add, " ")), 0o644); err != nil {
		return fmt.Errorf("%w: cannot enable %s in %q (%v): run 'echo %q > %s'",
			ErrNoController, strings.Join(add, " "), l.shown(file), err, strings.Join(add, " "), l.shown(file))
	}
	return nil
}

// RemoveStale removes the empty cgroups beside where Create puts new ones
// whose name stale accepts, such as those of a collector that was killed
// before it could remove its own. A cgroup with a process in it is kept.
// It returns how many it removed.
func (l *Layout) RemoveStale(stale func(name string) bool) (int, error) {
	mode, err := l.Mode()
	if err != nil {
		return 0, err
	}
	var parents []string
	if mode == ModeV2 {
		parent, _, err := l.v2Parent()
		if err != nil {
			return 0, err
		}
		parents = []string{parent}
	} else {
		for _, ctl := range v1Controllers {
			if p := l.selfDir(l.v1[ctl], ctl); !slices.Contains(parents, p) {
				parents = append(parents, p)
			}
		}
	}
	removed := 0
	var errs []error
	for _, parent := range parents {
		entries, err := os.ReadDir(parent)
		if err != nil {
			errs = append(errs, fmt.Errorf("cannot list cgroup %q: %w", parent, err))
			continue
		}
		for _, e := range entries {
			if !e.IsDir() || !stale(e.Name()) {
				continue
			}
			dir := filepath.Join(parent, e.Name())
			c := &Cgroup{mode: mode, pidsDir: dir}
			if busy, err := c.Populated(); err != nil || busy {
				continue
			}
			if err := removeTree(dir, parent); err != nil {
				errs = append(errs, err)
				continue
			}
			removed++
		}
	}
	return removed, errors.Join(errs...)
}

// shown is p as the host names it, without the root of a fake tree.
func (l *Layout) shown(p string) string {
	if l.root == "/" {
		return p
	}
	if rel, ok := strings.CutPrefix(p, filepath.Clean(l.root)); ok {
		return rel
	}
	return p
}

func mkdirHint(err error) error {
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		return fmt.Errorf("%w (run as root, or on cgroup v2 from a cgroup delegated to this user)", err)
	}
	return err
}

// Open returns an existing cgroup to sample (peakline collect --attach). p
// is a cgroup directory (a v2 one, or on v1 one under any controller's
// mount) or a cgroup path such as /proc/PID/cgroup shows ("/ansible/42").
// On v1 the directories in the other hierarchies are found through a
// process in the cgroup, else by the same relative path. Open neither
// creates nor resets anything: peaks are read without resetting them.
func (l *Layout) Open(p string) (*Cgroup, error) {
	mode, err := l.Mode()
	if err != nil {
		return nil, err
	}
	c := &Cgroup{mode: mode, root: l.root}
	if mode == ModeV2 {
		dir := l.resolve(l.v2, p)
		if err := isDir(dir); err != nil {
			return nil, err
		}
		c.dirs, c.homes = []string{dir}, []string{filepath.Dir(dir)}
		c.cpuDir, c.memDir, c.pidsDir, c.cpuCtlDir = dir, dir, dir, dir
		c.initPeaks()
		return c, nil
	}
	// The hierarchy p names, if it is a directory below a v1 mount.
	var given *mount
	for _, ctl := range v1Controllers {
		if m := l.v1[ctl]; under(p, m.dir) {
			given = m
			break
		}
	}
	var member []byte
	if given != nil {
		b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if f := strings.Fields(string(b)); len(f) > 0 {
			member, _ = os.ReadFile(filepath.Join(l.root, "proc", f[0], "cgroup"))
		}
	}
	for _, ctl := range v1Controllers {
		m := l.v1[ctl]
		var dir string
		switch {
		case m == given:
			dir = p
		case member != nil:
			peer := &Layout{root: l.root, self: map[string]string{}}
			peer.parseProcCgroup(member)
			dir = peer.selfDir(m, ctl)
		default:
			dir = l.resolve(m, p)
		}
		if err := isDir(dir); err != nil {
			return nil, fmt.Errorf("cannot open %s cgroup: %w", ctl, err)
		}
		if !slices.Contains(c.dirs, dir) {
			c.dirs, c.homes = append(c.dirs, dir), append(c.homes, filepath.Dir(dir))
		}
		c.setV1Dir(ctl, dir)
	}
	if m := l.v1["cpu"]; m != nil {
		dir := l.resolve(m, p)
		if member != nil {
			peer := &Layout{root: l.root, self: map[string]string{}}
			peer.parseProcCgroup(member)
			dir = peer.selfDir(m, "cpu")
		}
		if isDir(dir) == nil {
			c.cpuCtlDir = dir
		}
	}
	c.initPeaks()
	return c, nil
}

// resolve maps p, a directory below m or a cgroup path, to m's directory.
func (l *Layout) resolve(m *mount, p string) string {
	if under(p, m.dir) {
		return filepath.Clean(p)
	}
	rel := p
	if r, ok := strings.CutPrefix(filepath.Clean("/"+p), filepath.Clean(m.fsRoot)); ok {
		rel = r
	}
	return filepath.Join(m.dir, rel)
}

func under(p, dir string) bool {
	p, dir = filepath.Clean(p), filepath.Clean(dir)
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
}

func isDir(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %q", ErrNotFound, dir)
	}
	if err != nil {
		return fmt.Errorf("cannot stat cgroup %q: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %q is not a directory", ErrNotFound, dir)
	}
	return nil
}

// OpenDir opens the v2 cgroup's directory for SysProcAttr.CgroupFD, so a
// child is born in the cgroup (clone3 CLONE_INTO_CGROUP). The caller closes
// the file. On v1 it returns errors.ErrUnsupported.
func (c *Cgroup) OpenDir() (*os.File, error) {
	if c.mode != ModeV2 {
		return nil, errors.ErrUnsupported
	}
	f, err := os.Open(c.dirs[0])
	if err != nil {
		return nil, fmt.Errorf("cannot open cgroup directory: %w", err)
	}
	return f, nil
}

// AddProc moves process pid (with all its threads) into the cgroup in
// every hierarchy. Children it forks afterwards are born inside.
func (c *Cgroup) AddProc(pid int) error {
	for _, dir := range c.dirs {
		if err := writeControl(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("cannot move process %d into cgroup: %w", pid, err)
		}
	}
	return nil
}

// Procs returns the processes directly in the cgroup (not in child
// cgroups), from the pids hierarchy.
func (c *Cgroup) Procs() ([]int, error) {
	return readPids(filepath.Join(c.pidsDir, "cgroup.procs"))
}

// Populated reports whether any process is in the cgroup or below it.
func (c *Cgroup) Populated() (bool, error) {
	if c.mode == ModeV2 {
		if b, err := os.ReadFile(filepath.Join(c.pidsDir, "cgroup.events")); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(line, "populated "); ok {
					return strings.TrimSpace(v) != "0", nil
				}
			}
		}
	}
	found := false
	err := filepath.WalkDir(c.pidsDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p != c.pidsDir {
				return nil // a child cgroup went away during the walk
			}
			return err
		}
		if found || !d.IsDir() {
			return nil
		}
		pids, err := readPids(filepath.Join(p, "cgroup.procs"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		found = len(pids) > 0
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("cannot list cgroup processes: %w", err)
	}
	return found, nil
}

// Remove deletes a cgroup made by Create, with any child cgroups the job
// made. Processes still inside (an ssh ControlPersist master, a daemon the
// job left behind) are moved back to the creator's own cgroup first; they
// are not killed. Remove of an opened cgroup only closes it.
func (c *Cgroup) Remove() error {
	c.close()
	if !c.owned {
		return nil
	}
	var errs []error
	for i, dir := range c.dirs {
		errs = append(errs, removeTree(dir, c.homes[i]))
	}
	return errors.Join(errs...)
}

func removeTree(top, home string) error {
	var dirs []string
	err := filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot walk cgroup %q: %w", top, err)
	}
	slices.Reverse(dirs) // children first
	for _, dir := range dirs {
		var err error
		// A process that just exited can hold the cgroup busy until it is
		// reaped; retry briefly.
		for try := 0; try < 50; try++ {
			pids, _ := readPids(filepath.Join(dir, "cgroup.procs"))
			for _, pid := range pids {
				_ = writeControl(filepath.Join(home, "cgroup.procs"), strconv.Itoa(pid))
			}
			if err = removeCgroupDir(dir); err == nil || errors.Is(err, fs.ErrNotExist) {
				err = nil
				break
			}
			if !errors.Is(err, syscall.EBUSY) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("cannot remove cgroup %q: %w", dir, err)
		}
	}
	return nil
}

// removeCgroupDir removes a cgroup directory. The kernel allows rmdir of a
// cgroup full of control files; a fake tree in tests holds plain files, so
// those go first when rmdir says the directory is not empty.
func removeCgroupDir(dir string) error {
	err := syscall.Rmdir(dir)
	if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
		return os.RemoveAll(dir)
	}
	if err != nil {
		return &fs.PathError{Op: "rmdir", Path: dir, Err: err}
	}
	return nil
}

// writeControl writes one value to a control file in a single write, as
// the kernel expects.
func writeControl(file, value string) error {
	return os.WriteFile(file, []byte(value), 0o644)
}

func readPids(file string) ([]int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	return pids, nil
}

// setV1Dir records where a v1 controller's files of c are.
func (c *Cgroup) setV1Dir(ctl, dir string) {
	switch ctl {
	case "cpuacct":
		c.cpuDir = dir
	case "memory":
		c.memDir = dir
	case "pids":
		c.pidsDir = dir
	}
}
