package ansible

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
)

// realTree is a tree written by the real tools, in the testdata shared by
// all packages.
func realTree(name string) string { return filepath.Join("..", "..", "testdata", "ansible", name) }

// renderJobs prints jobs as the golden files hold them: every task, every
// series and every point, one per line.
func renderJobs(jobs []*Job) []byte {
	var b bytes.Buffer
	for _, j := range jobs {
		fmt.Fprintf(&b, "job %q source=%s samples=%d", j.ID, j.Source, j.Samples())
		if j.LastEvent != nil {
			fmt.Fprintf(&b, " last_event=%d@%d", j.LastEvent.Counter, j.LastEvent.TimeMs)
		}
		b.WriteByte('\n')
		for _, t := range j.Tasks {
			fmt.Fprintf(&b, "task %d %s %q start=%d end=%d\n", t.Counter, t.UUID, t.Name, t.StartMs, t.EndMs)
		}
		for _, s := range j.Series {
			fmt.Fprintf(&b, "series %s %d %s %q n=%d\n", s.Resource, s.Counter, s.UUID, s.Task, len(s.Ts))
			for i := range s.Ts {
				fmt.Fprintf(&b, "\t%d %s\n", s.Ts[i], strconv.FormatFloat(s.Vs[i], 'f', -1, 64))
			}
		}
	}
	return b.Bytes()
}

func TestReadGolden(t *testing.T) {
	trees := []struct{ golden, path string }{
		{"runner-basic.golden", realTree("runner-basic")},
		{"recap-csv.golden", realTree("recap-csv")},
		{"runner-loops.golden", realTree("runner-loops")},
		{"traps-runner.golden", filepath.Join("testdata", "trees", "runner-traps")},
		{"traps-awx.golden", filepath.Join("testdata", "trees", "awx", "playbook_profiling")},
		{"traps-recap-pertask.golden", filepath.Join("testdata", "trees", "recap-pertask")},
	}
	for _, tc := range trees {
		t.Run(tc.golden, func(t *testing.T) {
			jobs, err := Read(tc.path, ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, jobs)
			checkGolden(t, tc.golden, renderJobs(jobs))
		})
	}
}

// checkInvariants checks what every Read result must hold.
func checkInvariants(t *testing.T, jobs []*Job) {
	t.Helper()
	for _, j := range jobs {
		for i, tk := range j.Tasks {
			if tk.EndMs < tk.StartMs {
				t.Errorf("job %s task %d ends at %d before its start %d", j.ID, tk.Counter, tk.EndMs, tk.StartMs)
			}
			if i > 0 && tk.StartMs < j.Tasks[i-1].StartMs {
				t.Errorf("job %s tasks not ordered by start at %d", j.ID, i)
			}
		}
		for _, s := range j.Series {
			if len(s.Ts) == 0 || len(s.Ts) != len(s.Vs) {
				t.Errorf("job %s series %s/%d has %d times, %d values", j.ID, s.Resource, s.Counter, len(s.Ts), len(s.Vs))
			}
			for i := 1; i < len(s.Ts); i++ {
				if s.Ts[i] <= s.Ts[i-1] {
					t.Errorf("job %s series %s/%d times not increasing at %d", j.ID, s.Resource, s.Counter, i)
				}
			}
		}
	}
}
