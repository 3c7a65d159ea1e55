package awx

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/collector/awx/awxtest"
)

// reattrSrc is a real ansible-runner run: its samples are stored without
// events, and its job_events are what the fake AWX serves.
const reattrSrc = "../../testdata/ansible/runner-basic"

// memJobs holds stored jobs in memory as a store's ingest leaves them:
// what Write gets is what Read returns. Each step can be made to fail,
// and the steps taken are recorded.
type memJobs struct {
	jobs                map[string]*ansible.Job
	failRemove, failWrt error
	// dropOnWrite drops the first sample of what Write stores.
	dropOnWrite bool
	steps       []string
}

func (m *memJobs) Read(_ context.Context, id string) (*ansible.Job, error) {
	m.steps = append(m.steps, "read")
	return m.jobs[id], nil
}

func (m *memJobs) Remove(_ context.Context, id string) error {
	m.steps = append(m.steps, "remove")
	if m.failRemove != nil {
		return m.failRemove
	}
	delete(m.jobs, id)
	return nil
}

func (m *memJobs) Write(_ context.Context, j *ansible.Job) error {
	m.steps = append(m.steps, "write")
	if m.failWrt != nil {
		return m.failWrt
	}
	c := *j
	c.Series = nil
	for _, s := range j.Series {
		s.Ts, s.Vs = append([]int64(nil), s.Ts...), append([]float64(nil), s.Vs...)
		if m.dropOnWrite && len(s.Ts) > 1 {
			s.Ts, s.Vs = s.Ts[1:], s.Vs[1:]
			m.dropOnWrite = false
		}
		c.Series = append(c.Series, s)
	}
	m.jobs[j.ID] = &c
	return nil
}

func (m *memJobs) Finish(path string) string { return "store " + path }

// reattrFixture reads the run twice: whole (its own events) and bare
// (no events: every sample under counter 0), both as job 4242.
func reattrFixture(t *testing.T) (whole, bare *ansible.Job) {
	t.Helper()
	w, err := ansible.Read(reattrSrc, ansible.ReadOptions{JobID: "4242"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := ansible.Read(reattrSrc, ansible.ReadOptions{JobID: "4242", Events: []ansible.JobEvent{}})
	if err != nil {
		t.Fatal(err)
	}
	b[0].Info = ansible.JobInfo{Status: "running", Measured: ansible.MeasuredProcessTree}
	return w[0], b[0]
}

// fetchJob reads AWX job id from a fake AWX serving events (a
// job_events dir), as import --awx-url does.
func fetchJob(t *testing.T, id int64, events string) *ImportedJob {
	t.Helper()
	srv := awxtest.NewServer(awxtest.Options{Token: "awx-token"})
	t.Cleanup(srv.Close)
	srv.AddJob(awxtest.Job{ID: id, Status: "successful", TemplateID: 77, TemplateName: "perf demo", Playbook: "perf.yml", EventProcessingFinished: true}, events)
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("awx-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := FetchForImport(context.Background(), Config{URL: srv.URL, TokenFile: tok}, id, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestReattribute re-attributes a job stored without events: the store
// then holds every sample with its time and value under the counter and
// name the run's own events give it, with AWX's template and the stored
// measurement; the kept file holds the same job; the output names every
// task.
func TestReattribute(t *testing.T) {
	whole, bare := reattrFixture(t)
	a := fetchJob(t, 4242, filepath.Join(reattrSrc, "artifacts", "demo2", "job_events"))
	store := &memJobs{jobs: map[string]*ansible.Job{"4242": bare}}
	keep := filepath.Join(t.TempDir(), "kept.json")
	var out strings.Builder
	if err := Reattribute(context.Background(), a, store, ReattrOptions{JobFlag: "4242", Keep: keep}, &out, nil); err != nil {
		t.Fatalf("Reattribute: %v\n%s", err, &out)
	}
	if got := strings.Join(store.steps, " "); got != "read remove write read" {
		t.Fatalf("steps %q, want read remove write read", got)
	}
	got := store.jobs["4242"]
	if err := sameSamples(whole, got); err != nil {
		t.Fatalf("stored samples: %v", err)
	}
	if err := sameTasks(whole, got); err != nil {
		t.Fatalf("stored tasks: %v", err)
	}
	if err := sameSamples(bare, got); err != nil {
		t.Fatalf("samples changed: %v", err)
	}
	want := ansible.JobInfo{TemplateID: "77", TemplateName: "perf demo", Status: "successful", Playbook: "perf.yml", Measured: ansible.MeasuredProcessTree,
		Forks: ansible.DefaultForks} // the stand-in's forks 0: ansible's default
	if got.Info != want {
		t.Fatalf("info %+v, want %+v", got.Info, want)
	}
	kept, ok, err := ReadKeptJob(keep, 0)
	if err != nil || !ok {
		t.Fatalf("ReadKeptJob(%s) = %v, %v", keep, ok, err)
	}
	if err := sameSamples(got, kept); err != nil {
		t.Fatalf("kept file: %v", err)
	}
	if err := sameTasks(got, kept); err != nil {
		t.Fatalf("kept file: %v", err)
	}
	for _, line := range []string{
		"job 4242: the re-attributed job is kept in " + keep,
		fmt.Sprintf("tasks before: %d", len(bare.Tasks)),
		fmt.Sprintf("after: %d (AWX's task starts)", len(whole.Tasks)),
		fmt.Sprintf("stored re-attributed and checked: %d samples", whole.Samples()),
	} {
		if !strings.Contains(out.String(), line) {
			t.Fatalf("output lacks %q:\n%s", line, &out)
		}
	}
	moved := 0
	for _, task := range whole.Tasks {
		if !strings.Contains(out.String(), fmt.Sprintf("task %d %q:", task.Counter, task.Name)) {
			t.Fatalf("output does not name task %d %q:\n%s", task.Counter, task.Name, &out)
		}
	}
	for _, s := range whole.Series {
		if s.Counter != 0 {
			moved += len(s.Ts)
		}
	}
	if moved == 0 {
		t.Fatal("the fixture attributes no sample to a task: it tests nothing")
	}
}

// Refusals change nothing and keep no file: no samples stored, AWX's
// events far from the samples (unless --force), no task start.
func TestReattributeRefusals(t *testing.T) {
	_, bare := reattrFixture(t)
	events := filepath.Join(reattrSrc, "artifacts", "demo2", "job_events")
	keep := filepath.Join(t.TempDir(), "kept.json")
	f := func(a *ImportedJob, jobs map[string]*ansible.Job, o ReattrOptions, want string) {
		t.Helper()
		store := &memJobs{jobs: jobs}
		o.Keep = keep
		err := Reattribute(context.Background(), a, store, o, &strings.Builder{}, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v, want %q", err, want)
		}
		for _, s := range store.steps {
			if s != "read" {
				t.Fatalf("steps %v after a refusal, want reads only", store.steps)
			}
		}
		if _, err := os.Stat(keep); !os.IsNotExist(err) {
			t.Fatalf("a refusal kept a file: %v", err)
		}
	}
	a := fetchJob(t, 4242, events)
	f(a, map[string]*ansible.Job{}, ReattrOptions{JobFlag: "04242"}, "--job 04242: Peakline holds no samples of job 4242")

	far := *a
	far.Events = nil
	for _, ev := range a.Events {
		ev.TimeMs -= 24 * time.Hour.Milliseconds()
		far.Events = append(far.Events, ev)
	}
	f(&far, map[string]*ansible.Job{"4242": bare}, ReattrOptions{JobFlag: "4242"}, "--force")

	none := *a
	none.Events = []ansible.JobEvent{}
	f(&none, map[string]*ansible.Job{"4242": bare}, ReattrOptions{JobFlag: "4242"}, "AWX holds no task start event of job 4242")

	// --force re-attributes the far events anyway.
	store := &memJobs{jobs: map[string]*ansible.Job{"4242": bare}}
	if err := Reattribute(context.Background(), &far, store, ReattrOptions{JobFlag: "4242", Force: true, Keep: keep}, &strings.Builder{}, nil); err != nil {
		t.Fatalf("--force: %v", err)
	}
	if err := sameSamples(bare, store.jobs["4242"]); err != nil {
		t.Fatalf("--force: %v", err)
	}
}

// A failure after the kept file is written says what is left and how to
// store the file: the delete refused leaves the job; a failed write or a
// sample lost names the command that stores the kept copy.
func TestReattributeFailures(t *testing.T) {
	_, bare := reattrFixture(t)
	a := fetchJob(t, 4242, filepath.Join(reattrSrc, "artifacts", "demo2", "job_events"))
	f := func(store *memJobs, want ...string) {
		t.Helper()
		keep := filepath.Join(t.TempDir(), "kept.json")
		err := Reattribute(context.Background(), a, store, ReattrOptions{JobFlag: "4242", Keep: keep}, &strings.Builder{}, nil)
		for _, w := range want {
			if err == nil || !strings.Contains(err.Error(), strings.ReplaceAll(w, "KEEP", keep)) {
				t.Fatalf("error %v, want %q", err, strings.ReplaceAll(w, "KEEP", keep))
			}
		}
		if kept, ok, err := ReadKeptJob(keep, 0); err != nil || !ok || sameSamples(bare, kept) != nil {
			t.Fatalf("the kept file: %v, %v", ok, err)
		}
	}
	denied := &memJobs{jobs: map[string]*ansible.Job{"4242": bare}, failRemove: errors.New("403 needs admin")}
	f(denied, "403 needs admin", "the stored job is unchanged")
	if denied.jobs["4242"] != bare {
		t.Fatal("a refused delete changed the stored job")
	}
	f(&memJobs{jobs: map[string]*ansible.Job{"4242": bare}, failWrt: errors.New("503 unavailable")}, "503 unavailable", "the old job is deleted", "`store KEEP`")
	f(&memJobs{jobs: map[string]*ansible.Job{"4242": bare}, dropOnWrite: true}, "check re-attributed job 4242", "samples, want", "`store KEEP`")
}

// sameSamples compares every sample's resource, time and value bits, in
// whatever series it lies; sameTasks each sample's counter and name.
func TestSameSamplesAndTasks(t *testing.T) {
	job := func(mod func(*ansible.Job)) *ansible.Job {
		j := &ansible.Job{ID: "1", Series: []ansible.Series{
			{Resource: ansible.ResourceCPU, Counter: 3, Task: "a", Ts: []int64{10, 20}, Vs: []float64{1.5, 0}},
			{Resource: ansible.ResourceCPU, Counter: 5, Task: "b", Ts: []int64{30}, Vs: []float64{2}},
			{Resource: ansible.ResourceMemory, Counter: 3, Task: "a", Ts: []int64{10}, Vs: []float64{1 << 20}},
		}}
		if mod != nil {
			mod(j)
		}
		return j
	}
	want := job(nil)
	// Regrouped into other series, same samples and tasks.
	regrouped := job(func(j *ansible.Job) {
		j.Series = []ansible.Series{
			{Resource: ansible.ResourceMemory, Counter: 3, Task: "a", Ts: []int64{10}, Vs: []float64{1 << 20}},
			{Resource: ansible.ResourceCPU, Counter: 5, Task: "b", Ts: []int64{30}, Vs: []float64{2}},
			{Resource: ansible.ResourceCPU, Counter: 3, Task: "a", Ts: []int64{20}, Vs: []float64{0}},
			{Resource: ansible.ResourceCPU, Counter: 3, Task: "a", Ts: []int64{10}, Vs: []float64{1.5}},
		}
	})
	if err := sameSamples(want, regrouped); err != nil {
		t.Fatalf("regrouped: %v", err)
	}
	if err := sameTasks(want, regrouped); err != nil {
		t.Fatalf("regrouped: %v", err)
	}
	for name, c := range map[string]struct {
		mod  func(*ansible.Job)
		want string
	}{
		"negative zero": {func(j *ansible.Job) { j.Series[0].Vs[1] = math.Copysign(0, -1) }, "cpu sample at 20 ms is -0, want 0"},
		"moved":         {func(j *ansible.Job) { j.Series[1].Ts[0] = 31 }, "cpu sample at 31 ms"},
		"missing":       {func(j *ansible.Job) { j.Series = j.Series[:2] }, "memory: 0 samples, want 1"},
		"other resource": {func(j *ansible.Job) { j.Series[2].Resource = ansible.ResourcePids },
			"memory: 0 samples, want 1"},
	} {
		if err := sameSamples(want, job(c.mod)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	renamed := job(func(j *ansible.Job) { j.Series[1].Counter = 4 })
	if err := sameTasks(want, renamed); err == nil || !strings.Contains(err.Error(), `cpu sample at 30 ms is stored under task "4 b", want "5 b"`) {
		t.Fatalf("other counter: %v", err)
	}
}

// ReadKeptJob reads back what KeepJob writes; a file that is not JSON
// batches is not one (ok false), batches of two jobs are refused, and
// KeepJob never overwrites a file.
func TestKeptJob(t *testing.T) {
	whole, _ := reattrFixture(t)
	dir := t.TempDir()
	path, err := KeepJob(filepath.Join(dir, "sub", "kept.json"), time.Now(), whole)
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := ReadKeptJob(path, 0)
	if err != nil || !ok {
		t.Fatalf("ReadKeptJob = %v, %v", ok, err)
	}
	if got.ID != whole.ID || got.Info != whole.Info || len(got.Tasks) != len(whole.Tasks) || sameSamples(whole, got) != nil || sameTasks(whole, got) != nil {
		t.Fatalf("read back %s: %d tasks, info %+v; want %s with %d tasks, %+v", got.ID, len(got.Tasks), got.Info, whole.ID, len(whole.Tasks), whole.Info)
	}
	if _, err := KeepJob(path, time.Now(), whole); err == nil {
		t.Fatal("KeepJob overwrote a file")
	}
	if _, ok, err := ReadKeptJob(dir, 0); ok || err != nil {
		t.Fatalf("a dir: %v, %v; want not a kept file", ok, err)
	}
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte("template runs\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := ReadKeptJob(text, 0); ok || err != nil {
		t.Fatalf("a text file: %v, %v; want not a kept file", ok, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	two := filepath.Join(dir, "two.json")
	other := strings.Replace(strings.SplitN(string(b), "\n", 2)[0], `"job_id":"4242"`, `"job_id":"4243"`, 1)
	if err := os.WriteFile(two, append(b, other+"\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := ReadKeptJob(two, 0); !ok || err == nil || !strings.Contains(err.Error(), `is of job "4243", want one job`) {
		t.Fatalf("two jobs: %v, %v", ok, err)
	}
}
