package ansible

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// copyDir copies a tree, leaving out the dirs skip names (relative paths).
func copyDir(t *testing.T, src string, skip ...string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if slices.Contains(skip, rel) {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestReadGivenEvents reads runner trees stripped of their job_events with
// the events given through ReadOptions.Events: the jobs equal those read
// from the whole trees, and the given events are not modified.
func TestReadGivenEvents(t *testing.T) {
	for _, tc := range []struct{ tree, ident string }{
		{"runner-basic", "demo2"},
		{"runner-loops", "loops"},
	} {
		t.Run(tc.tree, func(t *testing.T) {
			whole, err := Read(realTree(tc.tree), ReadOptions{JobID: "42"})
			if err != nil {
				t.Fatal(err)
			}
			eventsDir := filepath.Join(realTree(tc.tree), "artifacts", tc.ident, "job_events")
			paths, err := ListEventFiles(eventsDir)
			if err != nil {
				t.Fatal(err)
			}
			r := NewEventReader()
			var evs []JobEvent
			for _, p := range paths { // in name order: not counter order
				ev, err := r.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				evs = append(evs, ev)
			}
			given := slices.Clone(evs)
			stripped := copyDir(t, realTree(tc.tree), filepath.Join("artifacts", tc.ident, "job_events"))
			got, err := Read(stripped, ReadOptions{JobID: "42", Events: evs})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(renderJobs(got), renderJobs(whole)) {
				t.Fatalf("read with given events:\n%s\nwant\n%s", renderJobs(got), renderJobs(whole))
			}
			if got[0].Info != whole[0].Info || len(whole[0].Tasks) == 0 || whole[0].Tasks[0].Counter == 0 {
				t.Fatalf("info %+v, want %+v", got[0].Info, whole[0].Info)
			}
			if !slices.Equal(evs, given) {
				t.Fatal("Read modified the given events")
			}
			// Without them, the stripped tree has no counters.
			bare, err := Read(stripped, ReadOptions{JobID: "42"})
			if err != nil {
				t.Fatal(err)
			}
			for _, task := range bare[0].Tasks {
				if task.Counter != 0 {
					t.Fatalf("a counter without events: %+v", task)
				}
			}
			// Given events replace the tree's own.
			again, err := Read(realTree(tc.tree), ReadOptions{JobID: "42", Events: evs[:0:0]})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(renderJobs(again), renderJobs(bare)) {
				t.Fatalf("empty given events did not replace the tree's:\n%s", renderJobs(again))
			}
		})
	}
	// Two recap dirs: two jobs.
	two := t.TempDir()
	perf, _ := filepath.Glob(filepath.Join(realTree("recap-csv"), "ansible-perf-*"))
	for _, name := range []string{"ansible-perf-a", "ansible-perf-b"} {
		if err := os.Rename(copyDir(t, perf[0]), filepath.Join(two, name)); err != nil {
			t.Fatal(err)
		}
	}
	// With a job id too (import --awx-url --job N), the error is about the
	// events, which need one job, not about the job id, which they need.
	for _, opts := range []ReadOptions{{Events: []JobEvent{}}, {JobID: "42", Events: []JobEvent{}}} {
		_, err := Read(two, opts)
		want := fmt.Sprintf("cannot use the given job events for %q: %v (ansible-perf-a, ansible-perf-b); read one of them", two, ErrSeveralJobs)
		if !errors.Is(err, ErrSeveralJobs) || err.Error() != want {
			t.Fatalf("several jobs with given events, job id %q: %v, want %q", opts.JobID, err, want)
		}
	}
}
