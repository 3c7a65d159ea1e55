package tsdb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
)

// A job's info and its tasks' identity labels are stored through Append
// and read back with the job; each field of the info is the newest
// value that sets it; the template's job list follows it; a deleted
// job's info goes with it.
func TestJobInfo(t *testing.T) {
	clock := time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)
	s, err := Open(t.TempDir(), Options{Now: func() time.Time { return clock }}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	start := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC).UnixMilli()
	add := func(b *Batch) {
		t.Helper()
		if _, err := s.Append(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	info := func(id string) JobInfo {
		t.Helper()
		sum, err := s.Summary(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return sum.Info
	}
	templateJobs := func(tmpl string, want ...string) {
		t.Helper()
		got, err := s.TemplateJobs(ctx, tmpl)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("TemplateJobs(%q) = %q, want %q", tmpl, got, want)
		}
	}

	b := exampleBatch("1001", start)
	b.Info = JobInfo{TemplateID: "7", TemplateName: "deploy-web", Status: "running"}
	b.Tasks[1].Play, b.Tasks[1].Role, b.Tasks[1].Path = "web servers", "cache", "roles/cache/tasks/main.yml:14"
	add(b)
	// The info is stored but is not a task record: one task, one record.
	res, err := s.Append(ctx, &Batch{JobID: "1002", Tasks: []Task{{Counter: 3, UUID: "u", Name: "a", StartMs: start}}, Info: JobInfo{TemplateID: "7"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Tasks != 1 || res.Samples != 0 {
		t.Errorf("a batch of one task and an info stored %d task records and %d samples, want 1 and 0", res.Tasks, res.Samples)
	}
	add(&Batch{JobID: "2001", Tasks: []Task{{Counter: 3, UUID: "u", Name: "a", StartMs: start}}, Info: JobInfo{TemplateID: "8"}})
	add(&Batch{JobID: "3001", Tasks: []Task{{Counter: 3, UUID: "u", Name: "a", StartMs: start}}})

	if got, want := info("1001"), (JobInfo{TemplateID: "7", TemplateName: "deploy-web", Status: "running"}); got != want {
		t.Errorf("info = %+v, want %+v", got, want)
	}
	job, err := s.ReadJob(ctx, "1001", minTime, maxTime)
	if err != nil {
		t.Fatal(err)
	}
	if got := job.Tasks[1]; got.Play != "web servers" || got.Role != "cache" || got.Path != "roles/cache/tasks/main.yml:14" || got.Name != "allocate memory" {
		t.Errorf("task 1 = %+v, want play, role and path as written", got)
	}
	if got := job.Tasks[0]; got.Play != "" || got.Role != "" || got.Path != "" {
		t.Errorf("task 0 = %+v, want no identity labels", got)
	}
	// The info sample sits at the batch's newest time (its last event),
	// so the span stays the job's own.
	if job.InfoFirstMs != start+6000 || job.InfoLastMs != start+6000 {
		t.Errorf("info times %d..%d, want %d", job.InfoFirstMs, job.InfoLastMs, start+6000)
	}
	templateJobs("7", "1001", "1002")
	templateJobs("8", "2001")
	templateJobs("9")

	// A later update: status set, the rest kept; a write at the same
	// sample time wins by the clock it was written at.
	clock = clock.Add(time.Second)
	add(&Batch{JobID: "1001", LastEvent: &Event{Counter: 12, TimeMs: start + 6000}, Info: JobInfo{TemplateID: "7", Status: "failed"}})
	if got, want := info("1001"), (JobInfo{TemplateID: "7", TemplateName: "deploy-web", Status: "failed"}); got != want {
		t.Errorf("after update info = %+v, want %+v", got, want)
	}
	clock = clock.Add(time.Second)
	add(&Batch{JobID: "1001", LastEvent: &Event{Counter: 12, TimeMs: start + 6000}, Info: JobInfo{TemplateID: "7", Status: "successful", Playbook: "site.yml"}})
	if got, want := info("1001"), (JobInfo{TemplateID: "7", TemplateName: "deploy-web", Status: "successful", Playbook: "site.yml"}); got != want {
		t.Errorf("after second update info = %+v, want %+v", got, want)
	}
	// An older sample (earlier time) does not win, whenever written.
	clock = clock.Add(time.Second)
	add(&Batch{JobID: "1001", Tasks: []Task{{Counter: 3, UUID: "uuid-burn some cpu", Name: "burn some cpu", StartMs: start}}, Info: JobInfo{Status: "running"}})
	if got := info("1001").Status; got != "successful" {
		t.Errorf("status after an older sample = %q, want successful", got)
	}

	// Moved to another template: listed there only.
	add(&Batch{JobID: "1002", LastEvent: &Event{Counter: 9, TimeMs: start + 100}, Info: JobInfo{TemplateID: "8"}})
	templateJobs("7", "1001")
	templateJobs("8", "1002", "2001")

	// A batch of info alone is stamped with the store's clock.
	add(&Batch{JobID: "3001", Info: JobInfo{TemplateID: "9"}})
	if job, err := s.ReadJob(ctx, "3001", minTime, maxTime); err != nil || job.InfoLastMs != clock.UnixMilli() {
		t.Errorf("info-only batch: info at %d (err %v), want the clock %d", job.InfoLastMs, err, clock.UnixMilli())
	}
	checkSpans(t, s, 4)

	if err := s.Delete(ctx, "1001"); err != nil {
		t.Fatal(err)
	}
	templateJobs("7")
	if _, err := s.Summary(ctx, "1001"); !errors.Is(err, ErrJobNotFound) {
		t.Errorf("summary of deleted job: err %v, want ErrJobNotFound", err)
	}
	// Re-imported without info, the old info does not come back.
	add(exampleBatch("1001", start))
	if got := info("1001"); !got.IsZero() {
		t.Errorf("re-imported job has info %+v, want none", got)
	}
	templateJobs("7")
}

func TestValidateInfo(t *testing.T) {
	f := func(mutate func(b *Batch), wantField string) {
		t.Helper()
		b := exampleBatch("v", 1796009975000)
		mutate(b)
		err := b.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), wantField) {
			t.Fatalf("Validate() = %v, want ErrInvalid naming %q", err, wantField)
		}
	}
	f(func(b *Batch) { b.Info.TemplateID = strings.Repeat("7", MaxTemplateIDLen+1) }, "template_id: is 129 bytes long")
	f(func(b *Batch) { b.Info.TemplateID = "7\n" }, "template_id: has a control character")
	f(func(b *Batch) { b.Info.TemplateName = strings.Repeat("n", MaxTemplateNameLen+1) }, "template_name: is 513 bytes long")
	f(func(b *Batch) { b.Info.Status = strings.Repeat("s", MaxStatusLen+1) }, "status: is 33 bytes long")
	f(func(b *Batch) { b.Info.Playbook = "\xff" }, "playbook: is not valid UTF-8")
	f(func(b *Batch) { b.Info.TemplateName = "deploy\x01web" }, "template_name: has a control character (U+0001) at byte 6")
	f(func(b *Batch) { b.Info.Status = "running\n" }, "status: has a control character (U+000A) at byte 7")
	f(func(b *Batch) { b.Info.Playbook = "site\u0085.yml" }, "playbook: has a control character (U+0085) at byte 4")
	f(func(b *Batch) { b.Info.Measured = "cgroups" }, `measured: must be cgroup or process-tree or empty, got "cgroups"`)
	f(func(b *Batch) { b.Info.Measured = "Cgroup" }, `measured: must be cgroup or process-tree or empty, got "Cgroup"`)
	f(func(b *Batch) { b.Info.Measured = "process-tree\n" }, "measured: has a control character (U+000A) at byte 12")
	f(func(b *Batch) { b.Tasks[1].Path = strings.Repeat("p", MaxTaskPathLen+1) }, "tasks[1].task_path")
	f(func(b *Batch) { b.Tasks[2].Play = strings.Repeat("p", MaxPlayLen+1) }, "tasks[2].play")
	f(func(b *Batch) { b.Tasks[0].Role = strings.Repeat("r", MaxRoleLen+1) }, "tasks[0].role")
}

// Info written by remote write is checked like the batch's.
func TestAppendSeriesJobInfo(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	at := time.Now().UnixMilli()
	ls := labels.FromStrings(labels.MetricName, MetricJobInfo, LabelJob, "r1", LabelTemplateID, "7", LabelTemplateName, strings.Repeat("n", MaxTemplateNameLen+1))
	if _, err := s.AppendSeries(ctx, []LabeledSeries{{Labels: ls, Ts: []int64{at}, Vs: []float64{1}}}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "template_name must be at most 512 bytes") {
		t.Fatalf("AppendSeries of a long template name: %v, want a refusal naming template_name", err)
	}
	for _, l := range [][2]string{{LabelTemplateID, "7\x00"}, {LabelTemplateName, "a\tb"}, {LabelStatus, "ok\x7f"}, {LabelPlaybook, "\x1bsite.yml"}} {
		ls := labels.FromStrings(labels.MetricName, MetricJobInfo, LabelJob, "r1", l[0], l[1])
		if _, err := s.AppendSeries(ctx, []LabeledSeries{{Labels: ls, Ts: []int64{at}, Vs: []float64{1}}}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), l[0]+" must be at most") {
			t.Errorf("AppendSeries of %s=%q: %v, want a refusal naming %s", l[0], l[1], err, l[0])
		}
	}
	ls = labels.FromStrings(labels.MetricName, MetricJobInfo, LabelJob, "r1", LabelTemplateID, "7", LabelStatus, "successful")
	if _, err := s.AppendSeries(ctx, []LabeledSeries{{Labels: ls, Ts: []int64{at}, Vs: []float64{1}}}); err != nil {
		t.Fatal(err)
	}
	sum, err := s.Summary(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if want := (JobInfo{TemplateID: "7", Status: "successful"}); sum.Info != want {
		t.Errorf("info = %+v, want %+v", sum.Info, want)
	}
}

// How a job was measured is stored and read back like the other fields
// (the newest value wins), by batch and by remote write; a value outside
// cgroup and process-tree is refused on both paths, naming measured.
func TestJobInfoMeasured(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	start := time.Now().Add(-time.Hour).UnixMilli()
	measured := func(id string) string {
		t.Helper()
		sum, err := s.Summary(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return sum.Info.Measured
	}
	b := exampleBatch("m1", start)
	b.Info = JobInfo{TemplateID: "7", Measured: MeasuredProcessTree}
	if _, err := s.Append(ctx, b); err != nil {
		t.Fatal(err)
	}
	if got := measured("m1"); got != "process-tree" {
		t.Errorf("measured = %q, want process-tree", got)
	}
	// A later update without it keeps it; one with it replaces it.
	if _, err := s.Append(ctx, &Batch{JobID: "m1", LastEvent: &Event{Counter: 12, TimeMs: start + 7000}, Info: JobInfo{Status: "successful"}}); err != nil {
		t.Fatal(err)
	}
	if sum, err := s.Summary(ctx, "m1"); err != nil || sum.Info != (JobInfo{TemplateID: "7", Status: "successful", Measured: "process-tree"}) {
		t.Errorf("after a status update info = %+v (err %v), want template 7, successful, process-tree", sum.Info, err)
	}
	if _, err := s.Append(ctx, &Batch{JobID: "m1", LastEvent: &Event{Counter: 12, TimeMs: start + 8000}, Info: JobInfo{Measured: MeasuredCgroup}}); err != nil {
		t.Fatal(err)
	}
	if got := measured("m1"); got != "cgroup" {
		t.Errorf("measured after an update = %q, want cgroup", got)
	}

	at := time.Now().UnixMilli()
	write := func(val string) error {
		ls := labels.FromStrings(labels.MetricName, MetricJobInfo, LabelJob, "m2", LabelMeasured, val)
		_, err := s.AppendSeries(ctx, []LabeledSeries{{Labels: ls, Ts: []int64{at}, Vs: []float64{1}}})
		return err
	}
	for _, bad := range []string{"cgroupfs", "process tree", "proc"} {
		if err := write(bad); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `measured must be cgroup or process-tree or empty, got "`+bad+`"`) {
			t.Errorf("AppendSeries of measured=%q: %v, want a refusal naming measured", bad, err)
		}
	}
	if err := write("process-tree"); err != nil {
		t.Fatal(err)
	}
	if got := measured("m2"); got != "process-tree" {
		t.Errorf("measured by remote write = %q, want process-tree", got)
	}
}

// TemplateJobs asked while jobs of the template are written lists every
// one of them once the writes are done: info read while a job's write was
// in flight is not kept after the write.
func TestTemplateJobsUnderWrites(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	start := time.Now().Add(-time.Hour).UnixMilli()
	const n = 60
	done := make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		defer close(errs)
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := s.TemplateJobs(ctx, "7"); err != nil {
				errs <- err
				return
			}
		}
	}()
	var want []string
	for i := range n {
		b := exampleBatch(fmt.Sprintf("j%03d", i), start+int64(i)*10_000)
		b.Info = JobInfo{TemplateID: "7"}
		if _, err := s.Append(ctx, b); err != nil {
			t.Fatal(err)
		}
		want = append(want, b.JobID)
	}
	close(done)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	got, err := s.TemplateJobs(ctx, "7")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("TemplateJobs(7) after the writes = %d jobs, want all %d; missing %v", len(got), n, missing(want, got))
	}
}

func missing(want, got []string) []string {
	var out []string
	for _, w := range want {
		if !slices.Contains(got, w) {
			out = append(out, w)
		}
	}
	return out
}
