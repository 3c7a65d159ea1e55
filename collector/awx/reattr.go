package awx

// Re-attribution of a stored job: samples a `peakline agent` stored with
// counter 0 (AWX down, or no AWX token) are attributed again to the task
// starts AWX's API gives, and the stored job is replaced by the result
// (import --awx-url URL --job N without a PATH).

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/collector/ship"
)

// StoredJobs is where the job to re-attribute is stored: an embedded
// store or a running server.
type StoredJobs interface {
	// Read returns the job's raw samples (every one, with its time and
	// value), grouped per resource and stored task, its tasks and its
	// info; nil when the store holds no sample of it.
	Read(ctx context.Context, jobID string) (*ansible.Job, error)
	// Remove deletes the job and returns once a write to it is taken.
	Remove(ctx context.Context, jobID string) error
	// Write stores j through the store's ingest.
	Write(ctx context.Context, j *ansible.Job) error
	// Finish is the command that stores the kept copy at path.
	Finish(path string) string
}

// ReattrOptions are the choices of a re-attribution beyond the job.
type ReattrOptions struct {
	// JobFlag is --job as given, named in refusals.
	JobFlag string
	// TemplateID and TemplateName, when set, win over AWX's
	// (--template, --template-name).
	TemplateID, TemplateName string
	// Keep is the file the re-attributed job is kept in before the
	// stored one is replaced (--keep); "" a new file in the user cache
	// dir.
	Keep string
	// Force re-attributes samples none of which lies within the span of
	// AWX's events (--force).
	Force bool
	// Now names the kept file; nil means time.Now.
	Now func() time.Time
}

// Reattribute re-attributes the stored samples of AWX job a to the task
// starts of its events and replaces the stored job with the result. Data
// first: nothing is deleted before the re-attributed job is written to a
// local file (its path printed), and a failure after the delete says how
// to store that file. Afterwards the stored job is read back and checked:
// the same samples, each under the task it was given.
func Reattribute(ctx context.Context, a *ImportedJob, store StoredJobs, o ReattrOptions, stdout io.Writer, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	id := JobID(a.ID)
	old, err := store.Read(ctx, id)
	if err != nil {
		return fmt.Errorf("read stored job %s: %w", id, err)
	}
	if old == nil || old.Samples() == 0 {
		return fmt.Errorf("--job %s: Peakline holds no samples of job %s to re-attribute (to import samples from files, give their PATH)", o.JobFlag, id)
	}
	if !slices.ContainsFunc(a.Events, func(ev ansible.JobEvent) bool { return ev.TaskStart }) {
		return fmt.Errorf("--job %s: AWX holds no task start event of job %d (%d events) to attribute the samples to; nothing changed", o.JobFlag, a.ID, a.Total)
	}
	next := ansible.Reattribute(old, a.Events)
	a.SetInfo(next, o.TemplateID != "", o.TemplateName != "")
	if o.TemplateID != "" {
		next.Info.TemplateID = o.TemplateID
	}
	if o.TemplateName != "" {
		next.Info.TemplateName = o.TemplateName
	}
	if msg := a.SpanMessage(next); msg != "" {
		if !o.Force {
			return fmt.Errorf("%s; nothing changed (--force re-attributes them anyway)", msg)
		}
		log.Warn(msg + "; re-attributing anyway (--force)")
	}
	if err := sameSamples(old, next); err != nil {
		return fmt.Errorf("re-attribute job %s: %w; nothing changed", id, err)
	}
	path, err := KeepJob(o.Keep, o.Now(), next)
	if err != nil {
		return fmt.Errorf("--keep: %w; nothing changed", err)
	}
	fmt.Fprintf(stdout, "job %s: the re-attributed job is kept in %s\n", id, path)
	printChanges(stdout, old, next)

	if err := store.Remove(ctx, id); err != nil {
		return fmt.Errorf("delete job %s to store it re-attributed: %w; the stored job is unchanged", id, err)
	}
	if err := store.Write(ctx, next); err != nil {
		return fmt.Errorf("store re-attributed job %s: %w; the old job is deleted: store the re-attributed one with `%s`", id, err, store.Finish(path))
	}
	got, err := store.Read(ctx, id)
	if err == nil && got == nil {
		err = errors.New("the store holds no sample of it")
	}
	if err == nil {
		err = sameSamples(next, got)
	}
	if err == nil {
		err = sameTasks(next, got)
	}
	if err != nil {
		return fmt.Errorf("check re-attributed job %s: %w; to store it again: `%s`", id, err, store.Finish(path))
	}
	fmt.Fprintf(stdout, "job %s: stored re-attributed and checked: %d samples, same times and values, %d tasks with AWX's counters\n", id, got.Samples(), len(next.Tasks))
	return nil
}

// point is one sample of a resource, for comparing jobs.
type point struct {
	resource string
	ms       int64
	value    float64
}

func points(j *ansible.Job) []point {
	var out []point
	for _, s := range j.Series {
		for i, t := range s.Ts {
			out = append(out, point{s.Resource, t, s.Vs[i]})
		}
	}
	slices.SortFunc(out, func(a, b point) int {
		return cmp.Or(cmp.Compare(a.resource, b.resource), cmp.Compare(a.ms, b.ms), cmp.Compare(a.value, b.value))
	})
	return out
}

// sameSamples checks that want and got hold the same samples: per
// resource the same number, times and values (math.Float64bits equal).
func sameSamples(want, got *ansible.Job) error {
	w, g := points(want), points(got)
	count := func(ps []point) map[string]int {
		m := map[string]int{}
		for _, p := range ps {
			m[p.resource]++
		}
		return m
	}
	wc, gc := count(w), count(g)
	for _, r := range []string{ansible.ResourceCPU, ansible.ResourceMemory, ansible.ResourcePids} {
		if wc[r] != gc[r] {
			return fmt.Errorf("%s: %d samples, want %d", r, gc[r], wc[r])
		}
	}
	if len(w) != len(g) {
		return fmt.Errorf("%d samples, want %d", len(g), len(w))
	}
	for i := range w {
		if w[i].resource != g[i].resource || w[i].ms != g[i].ms || math.Float64bits(w[i].value) != math.Float64bits(g[i].value) {
			return fmt.Errorf("%s sample at %d ms is %v, want %v at %d ms", g[i].resource, g[i].ms, g[i].value, w[i].value, w[i].ms)
		}
	}
	return nil
}

// sampleKey names one sample of a job: its resource and time.
type sampleKey struct {
	resource string
	ms       int64
}

// sampleTasks maps every sample of j to the name that name gives the task
// of its series.
func sampleTasks(j *ansible.Job, name func(ansible.Series) string) map[sampleKey]string {
	task := map[sampleKey]string{}
	for _, s := range j.Series {
		for _, t := range s.Ts {
			task[sampleKey{s.Resource, t}] = name(s)
		}
	}
	return task
}

// sameTasks checks that every sample of got belongs to the task (counter
// and name) it belongs to in want.
func sameTasks(want, got *ansible.Job) error {
	name := func(s ansible.Series) string { return strconv.FormatInt(s.Counter, 10) + " " + s.Task }
	task := sampleTasks(want, name)
	for _, s := range got.Series {
		have := name(s)
		for _, t := range s.Ts {
			if w := task[sampleKey{s.Resource, t}]; w != have {
				return fmt.Errorf("%s sample at %d ms is stored under task %q, want %q", s.Resource, t, have, w)
			}
		}
	}
	return nil
}

// printChanges prints the tasks before and after, and per new task its
// samples and how many of them changed task.
func printChanges(w io.Writer, old, next *ansible.Job) {
	name := func(s ansible.Series) string { return fmt.Sprintf("%d/%s/%s", s.Counter, s.UUID, s.Task) }
	was := sampleTasks(old, name)
	fmt.Fprintf(w, "job %s: tasks before: %d%s; after: %d (AWX's task starts)\n", next.ID, len(old.Tasks), taskList(old.Tasks), len(next.Tasks))
	type count struct{ total, moved int }
	per := map[int64]map[string]*count{}
	for _, s := range next.Series {
		if per[s.Counter] == nil {
			per[s.Counter] = map[string]*count{}
		}
		c := per[s.Counter][s.Resource]
		if c == nil {
			c = &count{}
			per[s.Counter][s.Resource] = c
		}
		now := name(s)
		for _, t := range s.Ts {
			c.total++
			if was[sampleKey{s.Resource, t}] != now {
				c.moved++
			}
		}
	}
	for _, t := range next.Tasks {
		line := fmt.Sprintf("  task %d %q:", t.Counter, t.Name)
		for _, r := range []string{ansible.ResourceCPU, ansible.ResourceMemory, ansible.ResourcePids} {
			if c := per[t.Counter][r]; c != nil {
				line += fmt.Sprintf(" %s=%d (%d re-attributed)", r, c.total, c.moved)
			}
		}
		fmt.Fprintln(w, line)
	}
}

// taskList names up to 5 tasks by counter and name.
func taskList(tasks []ansible.Task) string {
	if len(tasks) == 0 {
		return ""
	}
	var parts []string
	for i, t := range tasks {
		if i == 5 {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, fmt.Sprintf("%d %q", t.Counter, t.Name))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// KeepJob writes j as JSON ingest batches, one a line, to path or, when
// path is "", to a new file in the user cache dir named after j and now;
// the file is synced to disk and its absolute path returned.
// `peakline import` reads such a file back (ReadKeptJob).
func KeepJob(path string, now time.Time, j *ansible.Job) (string, error) {
	if path == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("find the user cache dir (give --keep FILE): %w", err)
		}
		name := fmt.Sprintf("job-%s-%s.json", url.PathEscape(j.ID), now.UTC().Format("20060102T150405.000Z"))
		path = filepath.Join(dir, "peakline", "reattributed", name)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("make the dir of %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("create %s: %w", path, err)
	}
	bw := bufio.NewWriter(f)
	enc := json.NewEncoder(bw)
	for i, b := range ship.Batches(j, 0) {
		if err := enc.Encode(&b); err != nil {
			f.Close()
			return "", fmt.Errorf("write batch %d to %s: %w", i+1, path, err)
		}
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", fmt.Errorf("sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("close %s: %w", path, err)
	}
	return filepath.Abs(path)
}

// ReadKeptJob reads a file of JSON ingest batches of one job (as KeepJob
// writes them) into one job. ok is false when path is not a regular file
// starting with a JSON object: not such a file.
//
// It reads at most maxBytes (0: ansible.DefaultMaxFileBytes), and holds
// one batch at a time besides the job.
func ReadKeptJob(path string, maxBytes int64) (j *ansible.Job, ok bool, err error) {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return nil, false, nil
	}
	f, err := ansible.OpenRegular(path, maxBytes)
	if err != nil {
		return nil, true, fmt.Errorf("open batch file %s: %w", path, err)
	}
	defer f.Close()
	br := bufio.NewReader(f)
	for {
		c, err := br.ReadByte()
		if err != nil {
			return nil, false, nil
		}
		if c == '{' {
			_ = br.UnreadByte()
			break
		}
		if c != ' ' && c != '\n' && c != '\r' && c != '\t' {
			return nil, false, nil
		}
	}
	dec := json.NewDecoder(br)
	dec.DisallowUnknownFields()
	for n := 1; ; n++ {
		var b ship.Batch
		if err := dec.Decode(&b); err == io.EOF {
			break
		} else if err != nil {
			return nil, true, fmt.Errorf("read batch file %s: batch %d: %w", path, n, err)
		}
		if b.JobID == "" || (j != nil && b.JobID != j.ID) {
			return nil, true, fmt.Errorf("read batch file %s: batch %d is of job %q, want one job", path, n, b.JobID)
		}
		if j == nil {
			j = &ansible.Job{ID: b.JobID, Source: "batches"}
		}
		b.AddTo(j)
	}
	if j == nil {
		return nil, true, fmt.Errorf("read batch file %s: no batch", path)
	}
	return j, true, nil
}
