package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/collector/awx"
	"github.com/peakline/peakline/collector/awx/awxtest"
)

// TestImportAWXEvents imports a runner tree stripped of its job_events,
// whose events and metadata come from a fake AWX serving the runner's own
// event files: the stored tasks are the runner's (counters, names, starts)
// and the job carries the template AWX names, its status and playbook.
func TestImportAWXEvents(t *testing.T) {
	const src = "../testdata/ansible/runner-basic"
	tree := copyTree(t, src)
	if err := os.RemoveAll(filepath.Join(tree, "artifacts", "demo2", "job_events")); err != nil {
		t.Fatal(err)
	}
	awxSrv := awxtest.NewServer(awxtest.Options{Token: "awx-read-token"})
	defer awxSrv.Close()
	awxSrv.AddJob(awxtest.Job{ID: 4242, Name: "perf demo run", Status: "successful", TemplateID: 77, TemplateName: "perf demo",
		Playbook: "perf.yml", ExecutionNode: "exec-1", EventProcessingFinished: true,
		Forks: 12, SCMRevision: "0123456789abcdef", EEImage: "quay.io/ansible/awx-ee:24.6.1"}, filepath.Join(src, "artifacts", "demo2", "job_events"))
	tokenFile := filepath.Join(t.TempDir(), "awx-token")
	if err := os.WriteFile(tokenFile, []byte("awx-read-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()

	// Mistakes first: nothing is stored by them.
	f := func(want string, args ...string) {
		t.Helper()
		out, err := run(t, append([]string{"import", "--data", data}, args...)...)
		if err == nil || !strings.Contains(out, want) {
			t.Fatalf("import %v: %v, output %q, want it to name %q", args, err, out, want)
		}
	}
	f("--job", "--awx-url", awxSrv.URL, "--awx-token-file", tokenFile, tree)
	f("--job", "--awx-url", awxSrv.URL, "--awx-token-file", tokenFile, "--job", "x", tree)
	f("--awx-token-file", "--awx-url", awxSrv.URL, "--job", "4242", tree)
	dead := httptest.NewServer(nil)
	dead.Close()
	f("--awx-url "+dead.URL, "--awx-url", dead.URL, "--awx-token-file", tokenFile, "--job", "4242", tree)
	wrong := filepath.Join(t.TempDir(), "wrong")
	os.WriteFile(wrong, []byte("nope\n"), 0o600)
	f(wrong, "--awx-url", awxSrv.URL, "--awx-token-file", wrong, "--job", "4242", tree)
	f("job not found", "--awx-url", awxSrv.URL, "--awx-token-file", tokenFile, "--job", "4243", tree)
	// Several paths are refused before AWX is asked anything.
	before := len(awxSrv.Requests())
	f("--awx-url: the events of AWX job 4242 attribute one job's samples, but 2 paths were given", "--awx-url", awxSrv.URL, "--awx-token-file", tokenFile, "--job", "4242", tree, tree)
	if n := len(awxSrv.Requests()); n != before {
		t.Fatalf("%d requests to AWX for a refused import", n-before)
	}

	out, err := run(t, "import", "--data", data, "--awx-url", awxSrv.URL, "--awx-token-file", tokenFile, "--job", "4242", tree)
	if err != nil {
		t.Fatalf("import --awx-url: %v\n%s", err, out)
	}
	if strings.Contains(out, "awx-read-token") || strings.Contains(out, "is --job") {
		t.Fatalf("the output shows the token or doubts the job:\n%s", out)
	}
	// The wrong token's one request (no retry), then one for the job and
	// one for its 12 events.
	if n := awxSrv.RequestCount(4242); n != 1+2 {
		t.Fatalf("%d requests for job 4242, want 3", n)
	}

	s := serve(t, "--data", data)
	var jobs struct {
		Jobs []struct {
			JobID        string         `json:"job_id"`
			TemplateID   string         `json:"template_id"`
			TemplateName string         `json:"template_name"`
			Status       string         `json:"status"`
			Playbook     string         `json:"playbook"`
			Samples      map[string]int `json:"samples"`
			Sizing       struct {
				Forks           int    `json:"forks"`
				Hosts           int    `json:"hosts"`
				ProjectRevision string `json:"project_revision"`
				EEImage         string `json:"ee_image"`
			} `json:"sizing"`
		} `json:"jobs"`
	}
	httpJSON(t, s.URL+"/api/v1/jobs", &jobs)
	if len(jobs.Jobs) != 1 {
		t.Fatalf("%d jobs stored, want 1: %+v", len(jobs.Jobs), jobs.Jobs)
	}
	j := jobs.Jobs[0]
	if j.JobID != "4242" || j.TemplateID != "77" || j.TemplateName != "perf demo" || j.Status != "successful" || j.Playbook != "perf.yml" {
		t.Fatalf("job info %+v", j)
	}
	// AWX's forks, revision and EE; the hosts of its playbook_on_stats.
	if z := j.Sizing; z.Forks != 12 || z.Hosts != 1 || z.ProjectRevision != "0123456789abcdef" || z.EEImage != "quay.io/ansible/awx-ee:24.6.1" {
		t.Fatalf("job sizing %+v, want AWX's 12 forks, revision and EE, and 1 host", z)
	}

	// The tasks are the runner's own, as importing the whole tree gives.
	ref, err := ansible.Read(src, ansible.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, task := range ref[0].Tasks {
		want = append(want, taskLine(task.Counter, task.Name, task.StartMs))
	}
	checkStoredTasks(t, s.URL, "4242", want)
	// Every sample of the tree is stored, attributed as the whole tree's.
	wantSamples := map[string]int{}
	for _, ser := range ref[0].Series {
		wantSamples[ser.Resource] += len(ser.Ts)
	}
	if b, _ := json.Marshal(j.Samples); !maps.Equal(j.Samples, wantSamples) {
		t.Fatalf("samples %s, want %v", b, wantSamples)
	}
}

// storedTask is a task of the jobs API's tasks list.
type storedTask struct {
	Counter int64  `json:"counter"`
	Name    string `json:"name"`
	Start   int64  `json:"start"`
	Events  struct {
		Lte int64 `json:"counter_lte"`
	} `json:"events"`
}

// checkStoredTasks checks the tasks of job id on the server at base
// against want, three taskLines, and returns them.
func checkStoredTasks(t *testing.T, base, id string, want []string) []storedTask {
	t.Helper()
	var tasks struct {
		Tasks []storedTask `json:"tasks"`
	}
	httpJSON(t, base+"/api/v1/jobs/"+id+"/tasks", &tasks)
	var got []string
	for _, task := range tasks.Tasks {
		got = append(got, taskLine(task.Counter, task.Name, task.Start))
	}
	if !slices.Equal(got, want) || len(want) != 3 {
		t.Fatalf("tasks\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	return tasks.Tasks
}

func taskLine(counter int64, name string, startMs int64) string {
	return strings.Join([]string{strconv.FormatInt(counter, 10), name, strconv.FormatInt(startMs, 10)}, " ")
}

// TestImportAWXEventsWin imports a whole runner tree, job_events and all,
// with --awx-url: AWX's events, not the tree's, attribute the samples (the
// user named the AWX job), and the command says which dir it did not read.
// AWX serves the runner's events with the task names changed and 500 more
// (a job with many hosts): they come in pages, with a progress bar, and
// the job's last event is AWX's last.
func TestImportAWXEventsWin(t *testing.T) {
	const src = "../testdata/ansible/runner-basic"
	srcEvents := filepath.Join(src, "artifacts", "demo2", "job_events")
	var last map[string]any
	awxEvents, copied := copyEvents(t, srcEvents, func(ev map[string]any) {
		if data, ok := ev["event_data"].(map[string]any); ok && data["task"] != nil {
			data["task"] = "AWX " + data["task"].(string)
		}
		if last == nil || ev["counter"].(float64) > last["counter"].(float64) {
			last = ev
		}
	})
	const more = 500
	for i := range more {
		counter := 100 + i
		uuid := fmt.Sprintf("00000000-0000-4000-8000-%012d", counter)
		writeEvent(t, awxEvents, fmt.Sprintf("%d-%s.json", counter, uuid), map[string]any{
			"uuid": uuid, "counter": counter, "event": "runner_on_ok", "created": last["created"],
			"event_data": map[string]any{"task": "AWX say hello", "host": fmt.Sprintf("host%d", i)},
		})
	}
	awxSrv := awxtest.NewServer(awxtest.Options{Token: "awx-read-token"})
	defer awxSrv.Close()
	awxSrv.AddJob(awxtest.Job{ID: 4242, Name: "perf demo run", Status: "successful", TemplateID: 77, TemplateName: "perf demo",
		Playbook: "perf.yml", EventProcessingFinished: true}, awxEvents)
	tokenFile := filepath.Join(t.TempDir(), "awx-token")
	if err := os.WriteFile(tokenFile, []byte("awx-read-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	out, err := run(t, "import", "--data", data, "--awx-url", awxSrv.URL, "--awx-token-file", tokenFile, "--job", "4242", src)
	if err != nil {
		t.Fatalf("import --awx-url: %v\n%s", err, out)
	}
	for _, want := range []string{
		"the tree's own job events are not read; AWX job 4242's events attribute its samples\" ignored=" + srcEvents,
		"reading the events of AWX job 4242",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("the output does not say %q:\n%s", want, out)
		}
	}
	// One request for the job, one per page of 200 events.
	total := copied + more
	if n, pages := awxSrv.RequestCount(4242), (total+awx.PageSize-1)/awx.PageSize; n != 1+pages || pages != 3 {
		t.Fatalf("%d requests for job 4242, want 1 + %d pages", n, pages)
	}

	s := serve(t, "--data", data)
	ref, err := ansible.Read(src, ansible.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, task := range ref[0].Tasks {
		want = append(want, taskLine(task.Counter, "AWX "+task.Name, task.StartMs))
	}
	tasks := checkStoredTasks(t, s.URL, "4242", want)
	if lte := tasks[2].Events.Lte; lte != 100+more-1 {
		t.Fatalf("the last task's events end at counter %d, want AWX's last, %d", lte, 100+more-1)
	}
}

// copyEvents copies the job_events dir src to a new temporary dir, each
// event through edit, and returns that dir and the number of events.
func copyEvents(t *testing.T, src string, edit func(ev map[string]any)) (string, int) {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var ev map[string]any
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatal(err)
		}
		edit(ev)
		writeEvent(t, dst, e.Name(), ev)
	}
	return dst, len(entries)
}

func writeEvent(t *testing.T, dir, name string, ev map[string]any) {
	t.Helper()
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestImportAWXOtherJob imports samples that AWX job 4242's events do not
// cover (cgroup_perf_recap files of an earlier run): the job is stored,
// and the command says that --job may name another job than the one that
// made the samples. AWX fails two requests: each retry is shown (an AWX
// that does not answer takes 30 s a try). AWX has not saved all the
// events of the finished job yet: that is said too.
func TestImportAWXOtherJob(t *testing.T) {
	awxSrv := awxtest.NewServer(awxtest.Options{Token: "awx-read-token"})
	defer awxSrv.Close()
	awxSrv.FailRequests(awxtest.Fault{Status: 503}, 1, 3)
	awxSrv.AddJob(awxtest.Job{ID: 4242, Status: "successful"},
		filepath.Join("../testdata", "ansible", "runner-basic", "artifacts", "demo2", "job_events"))
	tokenFile := filepath.Join(t.TempDir(), "awx-token")
	if err := os.WriteFile(tokenFile, []byte("awx-read-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// --job 04242 is AWX job 4242, stored as "4242" (AWX's events links).
	out, err := run(t, "import", "--data", t.TempDir(), "--awx-url", awxSrv.URL, "--awx-token-file", tokenFile, "--job", "04242", "../testdata/ansible/recap-csv")
	if err != nil {
		t.Fatalf("import --awx-url: %v\n%s", err, out)
	}
	want := `none of the 70 samples lies within the events of AWX job 4242 (2026-11-30T03:39:35.958Z .. 2026-11-30T03:39:41.831Z, give or take 5s): is --job the job that made them?"`
	if !strings.Contains(out, want) || !strings.Contains(out, "job 4242 (recap): 3 tasks") || !strings.Contains(out, "stored 70 new samples") {
		t.Fatalf("output\n%s\nwant it to say %q and store the samples", out, want)
	}
	for _, want := range []string{
		`msg="import --awx-url: AWX failed; asking again" request="job 4242" try=2 of=4`,
		`msg="import --awx-url: AWX failed; asking again" request="events of job 4242 after counter 0" try=2 of=4`,
		`msg="the AWX job is finished but AWX has not saved all its events yet; importing those it has" job=4242`,
	} {
		if strings.Count(out, want) != 1 {
			t.Fatalf("output\n%s\nwant it to say %q once", out, want)
		}
	}
	if n := awxSrv.RequestCount(4242); n != 4 {
		t.Fatalf("%d requests for job 4242, want 4 (2 failed, 2 answered)", n)
	}
}
