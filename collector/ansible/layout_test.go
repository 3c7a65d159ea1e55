package ansible

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func trapTree(parts ...string) string {
	return filepath.Join(append([]string{"testdata", "trees"}, parts...)...)
}

func TestReadBadInput(t *testing.T) {
	cases := []struct {
		name string
		path string
		want error    // errors.Is; nil: any error
		msg  []string // substrings of the message
	}{
		{"missing path", trapTree("nope"), fs.ErrNotExist, []string{trapTree("nope"), "want an ansible-runner private data dir"}},
		{"no layout", trapTree("bad", "no-layout"), ErrNoLayout, []string{trapTree("bad", "no-layout"), "cgroup_perf_recap", "playbook_profiling"}},
		{"a file", trapTree("bad", "no-layout", "notes.txt"), ErrNoLayout, []string{"notes.txt", "is a file"}},
		{"truncated JSON-seq record", trapTree("bad", "truncated-jsonseq"), ErrTruncated, []string{"cpu.json", "line 2 (record 2)"}},
		{"NaN in JSON-seq", trapTree("bad", "jsonseq-nan"), ErrBadValue, []string{"-cpu.json", "line 2 (record 2)", "NaN is not finite"}},
		{"JSON lines without RS", trapTree("bad", "jsonseq-no-rs"), nil, []string{"cpu.json", "line 1", "record separator 0x1E"}},
		{"JSON-seq record without value", trapTree("bad", "jsonseq-no-value"), nil, []string{"cpu.json", "line 1 (record 1)", `lacks "timestamp" or "value"`}},
		{"CSV value not a number", trapTree("bad", "csv-not-a-number"), nil, []string{"memory.csv", "line 3", "cannot parse value", `"12.5MB"`}},
		{"CSV nan", trapTree("bad", "csv-nan"), ErrBadValue, []string{"cpu.csv", "line 1", "not finite"}},
		{"CSV inf", trapTree("bad", "csv-inf"), ErrBadValue, []string{"cpu.csv", "line 2", "not finite"}},
		{"CSV negative", trapTree("bad", "csv-negative"), ErrBadValue, []string{"pids.csv", "line 2", "-1 is negative"}},
		{"CSV few fields", trapTree("bad", "csv-few-fields"), nil, []string{"cpu.csv", "line 1", "got 3 fields, want 4"}},
		{"CSV timestamp in ms", trapTree("bad", "csv-bad-timestamp"), ErrBadValue, []string{"cpu.csv", "line 1", "not unix seconds"}},
		{"CSV bad quote", trapTree("bad", "csv-bad-quote"), nil, []string{"cpu.csv", "line 1"}},
		{"job event not JSON", trapTree("bad", "events-not-json"), ErrBadEvent, []string{filepath.Join("job_events", "1-5eed0000-0000-0000-0000-0000000000a1.json")}},
		{"job event created not a time", trapTree("bad", "events-bad-created"), ErrBadEvent, []string{"1-5eed0000-0000-0000-0000-0000000000a1.json", `"yesterday"`}},
		{"job event without counter", trapTree("bad", "events-no-counter"), ErrBadEvent, []string{"1-5eed0000-0000-0000-0000-0000000000a1.json", `no "counter"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			jobs, err := Read(tc.path, ReadOptions{})
			if err == nil {
				t.Fatalf("Read(%q) = %d jobs, want an error", tc.path, len(jobs))
			}
			if jobs != nil {
				t.Errorf("Read returned jobs with its error")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("error %q is not %v", err, tc.want)
			}
			for _, m := range tc.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not say %q", err, m)
				}
			}
		})
	}
}

func jobIDs(jobs []*Job) []string {
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.ID+"/"+j.Source)
	}
	return ids
}

func TestReadLayouts(t *testing.T) {
	cases := []struct {
		name string
		path string
		opts ReadOptions
		want []string // id/source
	}{
		{"runner private data dir", realTree("runner-basic"), ReadOptions{}, []string{"demo2/runner"}},
		{"runner ident dir", filepath.Join(realTree("runner-basic"), "artifacts", "demo2"), ReadOptions{}, []string{"demo2/runner"}},
		{"runner profiling_data dir", filepath.Join(realTree("runner-basic"), "profiling_data"), ReadOptions{}, []string{"demo2/runner"}},
		{"job id replaces the ident", realTree("runner-basic"), ReadOptions{JobID: "42"}, []string{"42/runner"}},
		{"recap parent", realTree("recap-csv"), ReadOptions{}, []string{"ansible-perf-2026-11-30T03:39:20.072139/recap"}},
		{"recap dir", trapTree("recap-pertask", "ansible-perf-synthetic-b"), ReadOptions{}, []string{"ansible-perf-synthetic-b/recap"}},
		{"recap parent, two dirs", trapTree("recap-pertask"), ReadOptions{}, []string{"ansible-perf-synthetic-a/recap", "ansible-perf-synthetic-b/recap"}},
		{"awx playbook_profiling", trapTree("awx", "playbook_profiling"), ReadOptions{}, []string{"42/awx", "43/awx"}},
		{"awx job dir", trapTree("awx", "playbook_profiling", "42"), ReadOptions{}, []string{"42/awx"}},
		{"awx parent", trapTree("awx"), ReadOptions{}, []string{"42/awx", "43/awx"}},
		{"runner, two idents", trapTree("runner-two-idents"), ReadOptions{}, []string{"one/runner", "two/runner"}},
		{"runner, one of two idents", trapTree("runner-two-idents", "artifacts", "two"), ReadOptions{}, []string{"two/runner"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			jobs, err := Read(tc.path, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := jobIDs(jobs); !slices.Equal(got, tc.want) {
				t.Errorf("got jobs %v, want %v", got, tc.want)
			}
			checkInvariants(t, jobs)
		})
	}
}

func TestReadTwoIdentsSplitProfiling(t *testing.T) {
	jobs, err := Read(trapTree("runner-two-idents"), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if len(j.Series) != 1 || j.Series[0].Counter != 1 || j.Series[0].Task != "task of "+j.ID {
			t.Errorf("job %s: series %+v, want its own task's one series", j.ID, j.Series)
		}
	}
}

func TestReadUnclaimedProfile(t *testing.T) {
	dir := t.TempDir()
	copyTree(t, trapTree("runner-two-idents"), dir)
	stray := filepath.Join(dir, "profiling_data", "0-5eed0000-0000-0000-0000-000000000099-cpu.json")
	if err := os.WriteFile(stray, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Read(dir, ReadOptions{})
	if !errors.Is(err, ErrUnclaimedFile) || !strings.Contains(err.Error(), stray) {
		t.Errorf("got %v, want %v naming %s", err, ErrUnclaimedFile, stray)
	}
	// Asked for one ident, the other files are not its business.
	jobs, err := Read(filepath.Join(dir, "artifacts", "one"), ReadOptions{})
	if err != nil || len(jobs) != 1 || jobs[0].Samples() != 1 {
		t.Errorf("one ident: got %v, %v; want job one with 1 sample", jobIDs(jobs), err)
	}
}

func TestReadJobIDForSeveralJobs(t *testing.T) {
	_, err := Read(trapTree("recap-pertask"), ReadOptions{JobID: "7"})
	if !errors.Is(err, ErrSeveralJobs) || !strings.Contains(err.Error(), "ansible-perf-synthetic-a, ansible-perf-synthetic-b") {
		t.Errorf("got %v, want %v listing both jobs", err, ErrSeveralJobs)
	}
}

func TestReadProgress(t *testing.T) {
	var calls [][2]int
	_, err := Read(realTree("runner-basic"), ReadOptions{Progress: func(done, total int) {
		calls = append(calls, [2]int{done, total})
	}})
	if err != nil {
		t.Fatal(err)
	}
	const files = 12 + 9 // job events + profiling files, the empty one too
	if len(calls) != files {
		t.Fatalf("got %d progress calls, want %d", len(calls), files)
	}
	for i, c := range calls {
		if c != [2]int{i + 1, files} {
			t.Errorf("call %d: got %v, want [%d %d]", i, c, i+1, files)
		}
	}
}

// copyTree copies the regular files under src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dst, filepath.Dir(rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
