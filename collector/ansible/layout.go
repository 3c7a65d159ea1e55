package ansible

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// layoutsWanted is what a path must look like; it ends ErrNoLayout errors.
const layoutsWanted = "want an ansible-runner private data dir (artifacts/<ident>/job_events, profiling_data/) or one of its artifacts/<ident> dirs, " +
	"a cgroup_perf_recap output dir (cpu.csv, memory.csv, pids.csv or <n>-<task_uuid>-<cpu|memory|pids>.csv|.json) or a dir holding ansible-perf-* dirs, " +
	"or an AWX playbook_profiling dir or one of its <job_id> dirs"

// source is one job's files, before parsing.
type source struct {
	id        string
	layout    string
	eventsDir string // "" when the job has no job events
	profiles  []profileFile
	// idents is how many runner idents share profiles (profiling_data);
	// when more than one, each file goes to the ident whose events name it.
	idents int
	// pdd and identDir are the runner's private data dir and
	// artifacts/<ident> (LayoutRunner only): where env/extravars and the
	// status file are.
	pdd, identDir string
}

// findSources detects the layout of path and lists the jobs in it, ordered
// by id.
func findSources(path string) ([]source, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read %q: %w; %s", path, err, layoutsWanted)
	}
	if !fi.IsDir() && !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("cannot read %q: %w: it is %s; %s", path, ErrNotRegular, kindOf(fi.Mode()), layoutsWanted)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("cannot read %q: %w: it is a file; %s", path, ErrNoLayout, layoutsWanted)
	}
	clean := filepath.Clean(path)
	base, parent := filepath.Base(clean), filepath.Dir(clean)

	switch {
	case isDir(filepath.Join(path, "artifacts")):
		return runnerSources(path, "")
	case isDir(filepath.Join(path, "job_events")) && filepath.Base(parent) == "artifacts":
		// artifacts/<ident>: that ident of its private data dir.
		return runnerSources(filepath.Dir(parent), base)
	case base == "profiling_data" && isDir(filepath.Join(parent, "artifacts")):
		// Without its job events the samples would lose their counters.
		return runnerSources(parent, "")
	case base == "playbook_profiling":
		return dirSources(path, LayoutAWX, func(string) bool { return true })
	case isDir(filepath.Join(path, "playbook_profiling")):
		return dirSources(filepath.Join(path, "playbook_profiling"), LayoutAWX, func(string) bool { return true })
	}
	layout := LayoutRecap
	if filepath.Base(parent) == "playbook_profiling" {
		layout = LayoutAWX
	}
	profiles, err := listProfiles(path)
	if err != nil {
		return nil, err
	}
	if len(profiles) > 0 {
		return []source{{id: base, layout: layout, profiles: profiles}}, nil
	}
	srcs, err := dirSources(path, LayoutRecap, func(name string) bool { return strings.HasPrefix(name, "ansible-perf-") })
	if err != nil && !errors.Is(err, ErrNoLayout) {
		return nil, err
	}
	if len(srcs) > 0 {
		return srcs, nil
	}
	return nil, fmt.Errorf("cannot read %q: %w; %s", path, ErrNoLayout, layoutsWanted)
}

// dirSources makes a job of every subdir of dir accepted by want that holds
// plugin files; the subdir's name is the job id.
func dirSources(dir, layout string, want func(name string) bool) ([]source, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot list %q: %w", dir, err)
	}
	var srcs []source
	for _, e := range entries {
		if !e.IsDir() || !want(e.Name()) {
			continue
		}
		sub := filepath.Join(dir, e.Name())
		profiles, err := listProfiles(sub)
		if err != nil {
			return nil, err
		}
		if len(profiles) > 0 {
			srcs = append(srcs, source{id: e.Name(), layout: layout, profiles: profiles})
		}
	}
	if len(srcs) == 0 {
		return nil, fmt.Errorf("cannot read %q: %w: no job dir holds plugin files; %s", dir, ErrNoLayout, layoutsWanted)
	}
	return srcs, nil // os.ReadDir sorts by name
}

// runnerSources makes a job of every ident in the private data dir pdd
// (only of onlyIdent when set). All idents share pdd/profiling_data.
func runnerSources(pdd, onlyIdent string) ([]source, error) {
	artifacts := filepath.Join(pdd, "artifacts")
	entries, err := os.ReadDir(artifacts)
	if err != nil {
		return nil, fmt.Errorf("cannot list %q: %w", artifacts, err)
	}
	var idents []string
	for _, e := range entries {
		if e.IsDir() {
			idents = append(idents, e.Name())
		}
	}
	if len(idents) == 0 {
		return nil, fmt.Errorf("cannot read %q: %w: %q holds no ident dir; %s", pdd, ErrNoLayout, artifacts, layoutsWanted)
	}
	profiles, err := listProfiles(filepath.Join(pdd, "profiling_data"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err // no profiling_data: a run without profiling
	}
	var srcs []source
	for _, ident := range idents {
		if onlyIdent != "" && ident != onlyIdent {
			continue
		}
		src := source{id: ident, layout: LayoutRunner, profiles: profiles, idents: len(idents), pdd: pdd, identDir: filepath.Join(artifacts, ident)}
		if events := filepath.Join(artifacts, ident, "job_events"); isDir(events) {
			src.eventsDir = events
		}
		srcs = append(srcs, src)
	}
	return srcs, nil
}

// listProfiles lists the plugin output files in dir, by name. Other files
// (the plugin's stdout copy, notes) are not its output and are skipped.
func listProfiles(dir string) ([]profileFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot list %q: %w", dir, err)
	}
	var out []profileFile
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		if f, ok := parseProfileName(e.Name()); ok {
			f.path = filepath.Join(dir, e.Name())
			out = append(out, f)
		}
	}
	return out, nil
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// CheckTree tells whether path is a tree Read can read (one of its
// layouts), without reading any file: import checks every path it is given
// before it reads one, so a stray file among them fails at once.
func CheckTree(path string) error {
	_, err := findSources(path)
	return err
}
