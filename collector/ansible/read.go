package ansible

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ReadOptions tunes Read.
type ReadOptions struct {
	// JobID replaces the job id found in the path (runner ident, recap or
	// AWX dir name). It is an error when the path holds several jobs.
	JobID string
	// TemplateID and TemplateName replace the job template the tree
	// names (env/extravars), for every job read.
	TemplateID   string
	TemplateName string
	// Progress, when set, is called after each file is read, on Read's
	// goroutine, with the files read so far and the total.
	Progress func(doneFiles, totalFiles int)
	// Events, when not nil, are the job's events in place of the job_events
	// dir the path may hold: those AWX's API gives for a job whose samples
	// came from elsewhere. They attribute the samples as the job's own
	// event files would. It is an error when the path holds several jobs.
	// Read does not modify them.
	Events []JobEvent
	// MaxFileBytes is the largest file Read reads (0: DefaultMaxFileBytes);
	// a larger one is an error (ErrTooLarge).
	MaxFileBytes int64
}

// Read reads the jobs stored under path, whose layout it detects:
//
//   - an ansible-runner private data dir: every artifacts/<ident> is a job
//     with id <ident>, its events in artifacts/<ident>/job_events, its
//     samples in profiling_data/. When several idents share profiling_data,
//     each per-task file goes to the ident whose job events name its task
//     uuid, and a file none names is an error (ErrUnclaimedFile). A path to
//     one artifacts/<ident> dir reads that ident only.
//   - a cgroup_perf_recap output dir: one job whose id is the dir name; or
//     a dir holding ansible-perf-* dirs: a job each.
//   - an AWX playbook_profiling dir (a job per <job_id> subdir) or one of
//     its <job_id> dirs.
//
// A sample belongs to the task that was running when it was taken: the
// latest task start event (task, handler or cleanup task) created at or
// before the sample, compared in milliseconds. A sample older than the first
// task start belongs to the first start of its own task uuid, else to no
// task (counter 0). Without task start events the plugin's task uuid and name
// decide and the counter is 0. The number in per-task file names is the
// plugin's own task index and is ignored.
//
// A runner job's info (Job.Info) comes from the private data dir's
// env/extravars as AWX writes it (awx_job_template_id and
// awx_job_template_name, or the tower_* names; YAML or JSON), its
// artifacts/<ident>/status and the playbook its job events name. When
// the extravars hold awx_job_id (or tower_job_id) and the dir holds one
// ident, that id is the job id (the id AWX's job-events links need);
// ReadOptions.JobID, TemplateID and TemplateName override what the tree
// says.
//
// Read reads only regular files of at most ReadOptions.MaxFileBytes whose
// real path (symbolic links resolved) lies in the tree: the runner's
// private data dir, else path. It checks every file it will read before it
// reads any, so a named pipe, a device, a socket (ErrNotRegular), a file
// over the limit (ErrTooLarge) or a link out of the tree (ErrOutsideTree)
// is refused at once, and no read blocks. Profiling files are read a record
// at a time (a record is at most 1 MiB), and a job event file a byte at a
// time, keeping only the fields Read uses (each at most 1 MiB): memory
// follows the samples and events read, not the size of the files.
//
// Read parses every file before it returns: on any error it returns no job.
// Errors name the file, and the line (and JSON-seq record) where it applies;
// test them with ErrNoLayout, ErrBadValue, ErrTruncated, ErrBadEvent,
// ErrSeveralJobs, ErrUnclaimedFile, ErrNotRegular, ErrTooLarge,
// ErrOutsideTree or fs.ErrNotExist. Jobs are ordered by id. Empty plugin
// files (short tasks) hold no samples and are no error.
func Read(path string, opts ReadOptions) ([]*Job, error) {
	srcs, err := findSources(path)
	if err != nil {
		return nil, err
	}
	if opts.Events != nil && len(srcs) > 1 {
		return nil, fmt.Errorf("cannot use the given job events for %q: %w (%s); read one of them", path, ErrSeveralJobs, sourceIDs(srcs))
	}
	if opts.JobID != "" {
		if len(srcs) > 1 {
			return nil, fmt.Errorf("cannot use job id %q for %q: %w (%s); drop the job id or read one of them", opts.JobID, path, ErrSeveralJobs, sourceIDs(srcs))
		}
		srcs[0].id = opts.JobID
	}
	if opts.Events != nil {
		srcs[0].eventsDir = ""
	}
	root := path
	if srcs[0].layout == LayoutRunner {
		root = srcs[0].pdd // profiling_data and env/ are the private data dir's
	}
	gate, err := newFileGate(root, opts.MaxFileBytes)
	if err != nil {
		return nil, err
	}
	infos := make([]JobInfo, len(srcs))
	for i := range srcs {
		if err := sourceInfo(&srcs[i], &infos[i], opts, gate); err != nil {
			return nil, fmt.Errorf("cannot read job %q: %w", srcs[i].id, err)
		}
	}
	r := &reader{progress: opts.Progress, in: newInterner(), gate: gate}

	events := make([][]JobEvent, len(srcs))
	eventFiles := make([][]string, len(srcs))
	for i, src := range srcs {
		if src.eventsDir == "" {
			continue
		}
		if eventFiles[i], err = ListEventFiles(src.eventsDir); err != nil {
			return nil, fmt.Errorf("cannot read job %q: %w", src.id, err)
		}
		r.total += len(eventFiles[i])
	}
	if err := r.checkFiles(srcs, eventFiles); err != nil {
		return nil, err
	}
	shared := srcs[0].idents > 1
	// Idents sharing profiling_data share its files: count them once.
	if shared {
		r.total += len(srcs[0].profiles)
	} else {
		for _, src := range srcs {
			r.total += len(src.profiles)
		}
	}

	if opts.Events != nil {
		events[0] = slices.Clone(opts.Events)
	}
	for i := range srcs {
		for _, p := range eventFiles[i] {
			ev, err := readEventFile(r.gate, p, r.in)
			if err != nil {
				return nil, err
			}
			events[i] = append(events[i], ev)
			r.tick()
		}
	}
	if shared {
		if err := r.claimProfiles(srcs, events); err != nil {
			return nil, err
		}
	}

	jobs := make([]*Job, len(srcs))
	for i, src := range srcs {
		var samples []sample
		for _, f := range src.profiles {
			if samples, err = r.readProfile(samples, f); err != nil {
				return nil, err
			}
		}
		jobs[i] = buildJob(src.id, src.layout, events[i], samples)
		jobs[i].Info = infos[i]
		if jobs[i].Info.Playbook == "" {
			jobs[i].Info.Playbook = firstPlaybook(events[i])
		}
		SizingFromEvents(&jobs[i].Info, events[i])
	}
	return jobs, nil
}

// sourceIDs lists the sources' job ids, comma separated.
func sourceIDs(srcs []source) string {
	ids := make([]string, len(srcs))
	for i, s := range srcs {
		ids[i] = s.id
	}
	return strings.Join(ids, ", ")
}

// sourceInfo fills info from a runner source's extravars and status, and
// sets the source's id to the AWX job id they name (see Read).
func sourceInfo(src *source, info *JobInfo, opts ReadOptions, gate fileGate) error {
	if src.layout == LayoutRunner {
		vars, err := readExtravars(gate, src.pdd)
		if err != nil {
			return err
		}
		info.TemplateID, info.TemplateName, info.ProjectRevision = vars.TemplateID, vars.TemplateName, vars.ProjectRevision
		info.Forks = runnerForks(gate, src.pdd, src.identDir)
		if vars.JobID != "" && opts.JobID == "" && src.idents == 1 {
			src.id = vars.JobID
		}
		if info.Status, err = readStatus(gate, src.identDir); err != nil {
			return err
		}
	}
	if opts.TemplateID != "" {
		info.TemplateID = opts.TemplateID
	}
	if opts.TemplateName != "" {
		info.TemplateName = opts.TemplateName
	}
	return nil
}

// reader holds what one Read call shares across files.
type reader struct {
	progress    func(doneFiles, totalFiles int)
	done, total int
	in          *interner
	gate        fileGate
}

// checkFiles checks every job event and profiling file Read will read
// (see fileGate.check) before any is read: a file that would block or never
// end, or that is too large, is refused at once, naming it.
func (r *reader) checkFiles(srcs []source, eventFiles [][]string) error {
	for i, src := range srcs {
		for _, p := range eventFiles[i] {
			if err := r.gate.check(p); err != nil {
				return fmt.Errorf("cannot read job event file %q: %w", p, err)
			}
		}
		if i > 0 && src.idents > 1 {
			continue // the idents share profiling_data: checked once
		}
		for _, f := range src.profiles {
			if err := r.gate.check(f.path); err != nil {
				return fmt.Errorf("cannot read profiling file %q: %w", f.path, err)
			}
		}
	}
	return nil
}

func (r *reader) tick() {
	r.done++
	if r.progress != nil {
		r.progress(r.done, r.total)
	}
}

// readProfile appends the samples of one plugin file to dst.
func (r *reader) readProfile(dst []sample, f profileFile) ([]sample, error) {
	file, err := r.gate.open(f.path)
	if err != nil {
		return dst, fmt.Errorf("cannot read profiling file %q: %w", f.path, err)
	}
	defer file.Close()
	parse := parseJSONSeq
	if f.csv {
		parse = parseCSV
	}
	dst, err = parse(dst, file, f.resource, f.uuid, r.in)
	var le *lineError
	if err != nil && !errors.As(err, &le) {
		return dst, fmt.Errorf("cannot read profiling file %q: %w", f.path, err)
	}
	if err != nil {
		return dst, fmt.Errorf("cannot parse profiling file %q %w", f.path, err)
	}
	r.tick()
	return dst, nil
}

// claimProfiles gives each of the profiling files that several runner idents
// share to the ident whose job events name the file's task uuid. A file no
// ident names is an error when srcs holds all the idents, and another
// ident's file (skipped, but counted as done) when srcs holds one.
func (r *reader) claimProfiles(srcs []source, events [][]JobEvent) error {
	owner := make(map[string]int)
	for i := range srcs {
		for _, ev := range events[i] {
			if ev.TaskUUID != "" {
				owner[ev.TaskUUID] = i
			}
		}
	}
	shared := srcs[0].profiles
	for i := range srcs {
		srcs[i].profiles = nil
	}
	for _, f := range shared {
		i, ok := owner[f.uuid]
		switch {
		case ok:
			srcs[i].profiles = append(srcs[i].profiles, f)
		case len(srcs) < srcs[0].idents:
			r.tick()
		default:
			return fmt.Errorf("cannot tell which job profiling file %q belongs to: %w: the job events of none of the %d idents name task %q; read one ident's dir (artifacts/<ident>) instead", f.path, ErrUnclaimedFile, len(srcs), f.uuid)
		}
	}
	return nil
}
