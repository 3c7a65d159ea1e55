package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// copyTree copies a testdata tree into a temp dir so a test can damage it.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestImportBadInput damages real trees in the ways real files break and
// checks each import fails naming the file (and line), storing nothing of
// that job while what was stored before stays intact.
func TestImportBadInput(t *testing.T) {
	data := t.TempDir()
	if out, err := run(t, "import", "--data", data, "../testdata/ansible/recap-csv"); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	cases := []struct {
		name   string
		tree   string
		damage func(root string) string // returns the path to import
		want   []string
	}{
		{"truncated json-seq record", "../testdata/ansible/runner-basic", func(root string) string {
			f := filepath.Join(root, "profiling_data", "0-02fc0000-0001-bfc5-3899-000000000004-memory.json")
			b, _ := os.ReadFile(f)
			_ = os.WriteFile(f, b[:len(b)-40], 0o644)
			return root
		}, []string{"0-02fc0000-0001-bfc5-3899-000000000004-memory.json", "line 14"}},
		{"csv row with a non-number", "../testdata/ansible/recap-csv", func(root string) string {
			dirs, _ := filepath.Glob(filepath.Join(root, "ansible-perf-*"))
			f := filepath.Join(dirs[0], "pids.csv")
			b, _ := os.ReadFile(f)
			b = bytes.Replace(b, []byte(",12\r\n"), []byte(",twelve\r\n"), 1)
			_ = os.WriteFile(f, b, 0o644)
			return dirs[0]
		}, []string{"pids.csv", "line 3", "twelve"}},
		{"job_events file that is not json", "../testdata/ansible/runner-basic", func(root string) string {
			f := filepath.Join(root, "artifacts", "demo2", "job_events", "6-02fc0000-0001-bfc5-3899-000000000005.json")
			_ = os.WriteFile(f, []byte(`{"counter": 6, "event": "playbook_on_task_start", `), 0o644)
			return root
		}, []string{"6-02fc0000-0001-bfc5-3899-000000000005.json"}},
		{"path that does not exist", "", func(string) string { return "../testdata/ansible/no-such-tree" }, []string{"../testdata/ansible/no-such-tree"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := ""
			if c.tree != "" {
				root = copyTree(t, c.tree)
			}
			path := c.damage(root)
			out, err := run(t, "import", "--data", data, path)
			if err == nil {
				t.Fatalf("import of a damaged tree succeeded:\n%s", out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("error does not name %q:\n%s", w, out)
				}
			}
		})
	}
	// Nothing half-done: only the job imported first is stored, whole.
	s := serve(t, "--data", data)
	var jobs struct {
		Jobs []struct {
			JobID   string         `json:"job_id"`
			Samples map[string]int `json:"samples"`
		} `json:"jobs"`
	}
	code, body := s.get(t, "/api/v1/jobs")
	if code != 200 || json.Unmarshal(body, &jobs) != nil {
		t.Fatalf("jobs: %d %s", code, body)
	}
	if len(jobs.Jobs) != 1 || jobs.Jobs[0].Samples["cpu"] != 22 || jobs.Jobs[0].Samples["memory"] != 24 || jobs.Jobs[0].Samples["pids"] != 24 {
		t.Fatalf("store after failed imports: %s", body)
	}
}

func TestImportFlags(t *testing.T) {
	f := func(want string, args ...string) {
		t.Helper()
		out, err := run(t, args...)
		if err == nil || !strings.Contains(out, want) {
			t.Fatalf("peakline %v: %v, output %q, want it to name %q", args, err, out, want)
		}
	}
	f("--data or --server", "import", "../testdata/ansible/runner-basic")
	f("--data or --server", "import", "--data", t.TempDir(), "--server", "http://127.0.0.1:1", "../testdata/ansible/runner-basic")
	f("--job", "import", "--data", t.TempDir(), "--job", "x", "../testdata/ansible/runner-basic", "../testdata/ansible/recap-csv")
	f("requires at least 1 arg", "import", "--data", t.TempDir())
	f("--max-file-size", "import", "--data", t.TempDir(), "--max-file-size", "0", "../testdata/ansible/runner-basic")
	f("--events-url", "serve", "--data", t.TempDir(), "--events-url", "https://awx.example/jobs/{job_id}")
	f("--data", "serve")
}

// TestImportViaServerIsIdempotent posts a tree to a running server twice
// (and once more with --job), then restarts the server after SIGTERM: every
// acknowledged sample is there, once.
func TestImportViaServerIsIdempotent(t *testing.T) {
	data := t.TempDir()
	s := serve(t, "--data", data)
	for i := 0; i < 2; i++ {
		if out, err := run(t, "import", "--server", s.URL, "../testdata/ansible/runner-basic"); err != nil {
			t.Fatalf("import --server: %v\n%s", err, out)
		}
	}
	if out, err := run(t, "import", "--server", s.URL, "--job", "renamed", "../testdata/ansible/runner-basic"); err != nil {
		t.Fatalf("import --server --job: %v\n%s", err, out)
	}
	s.stop(t)
	s = serve(t, "--data", data)
	for _, id := range []string{"demo2", "renamed"} {
		var g graphDoc
		code, body := s.get(t, "/api/v1/jobs/"+id+"/graph")
		if code != http.StatusOK || json.Unmarshal(body, &g) != nil {
			t.Fatalf("graph %s: %d %s", id, code, body)
		}
		got := map[string]int{}
		for _, sr := range g.Series {
			got[sr.Resource] = sr.RawSamples
		}
		if got["cpu"] != 22 || got["memory"] != 25 || got["pids"] != 25 || len(g.Tasks) != 3 {
			t.Fatalf("job %s after two imports and a restart: %v, %d tasks", id, got, len(g.Tasks))
		}
	}
}

// TestQueryCommand evaluates MetricsQL over a stopped store and over a
// running server, and names the flag or function on mistakes.
func TestQueryCommand(t *testing.T) {
	data := t.TempDir()
	if out, err := run(t, "import", "--data", data, "../testdata/ansible/runner-basic"); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	const q = `max by (task) (max_over_time(peakline_memory_bytes{job_id="demo2"}[10s]))`
	out, err := run(t, "query", "--data", data, "--time", "2026-11-30T03:39:42Z", q)
	if err != nil {
		t.Fatalf("query --data: %v\n%s", err, out)
	}
	outData := out
	// 309.65625 MiB is the allocation task's peak in the raw file.
	for _, want := range []string{`{task="allocate memory"} => 324698112 @ 2026-11-30T03:39:42.000Z`, `{task="burn some cpu"} => 102653952`} {
		if !strings.Contains(out, want) {
			t.Fatalf("query --data output lacks %q:\n%s", want, out)
		}
	}
	out, err = run(t, "query", "--data", data, "--start", "1796009976", "--end", "1796009978", "--step", "1s",
		`WITH (j = {job_id="demo2"}) count(peakline_pids{j})`)
	if err != nil || !strings.Contains(out, "{}\n  2026-11-30T03:39:36.000Z  1\n  2026-11-30T03:39:37.000Z  1\n  2026-11-30T03:39:38.000Z  1\n") {
		t.Fatalf("range query: %v\n%s", err, out)
	}
	f := func(want string, args ...string) {
		t.Helper()
		out, err := run(t, append([]string{"query"}, args...)...)
		if err == nil || !strings.Contains(out, want) {
			t.Fatalf("peakline query %v: %v %q, want it to say %q", args, err, out, want)
		}
	}
	f(`function "buckets_limit"`, "--data", data, "buckets_limit(3, x)")
	f("--time: must be RFC 3339", "--data", data, "--time", "yesterday", "x")
	f("--start, --end and --step", "--data", data, "--start", "1", "x")
	f("--data or --server", "x")

	s := serve(t, "--data", data)
	out, err = run(t, "query", "--server", s.URL, "--time", "2026-11-30T03:39:42Z", q)
	if err != nil || !strings.Contains(out, `{task="allocate memory"} => 324698112 @ 2026-11-30T03:39:42.000Z`) {
		t.Fatalf("query --server: %v\n%s", err, out)
	}
	// The same answer, in the same units, from both.
	if d := strings.Join(sortedLines(outData), "\n"); d != strings.Join(sortedLines(out), "\n") {
		t.Fatalf("query --data and --server differ:\n%s\n--\n%s", outData, out)
	}
	// Nothing matched: said, on stderr; nothing on stdout.
	code, stdout, stderr := runExit(t, nil, "query", "--server", s.URL, "--time", "2026-11-30T03:39:42Z", `peakline_memory_bytes{job_id="no-such-job"}`)
	if code != 0 || stdout != "" || !strings.Contains(stderr, `no series matched peakline_memory_bytes{job_id="no-such-job"}`) {
		t.Errorf("query --server of nothing: %d, stdout %q, stderr %q; want 0, nothing and a word that nothing matched", code, stdout, stderr)
	}
	s.stop(t)
	for _, where := range [][]string{{"--data", data}} {
		code, stdout, stderr := runExit(t, nil, append(append([]string{"query"}, where...), "--time", "2026-11-30T03:39:42Z", `peakline_memory_bytes{job_id="no-such-job"}`)...)
		if code != 0 || stdout != "" || !strings.Contains(stderr, `no series matched peakline_memory_bytes{job_id="no-such-job"}`) {
			t.Errorf("query %s of nothing: %d, stdout %q, stderr %q; want 0, nothing and a word that nothing matched", where[0], code, stdout, stderr)
		}
	}
}

// sortedLines splits s into its lines, sorted, leaving out log lines.
func sortedLines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if !strings.HasPrefix(l, "time=") {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}
