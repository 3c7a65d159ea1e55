package workload

import (
	"slices"
	"testing"
)

func TestStreamChunkingDoesNotChangeData(t *testing.T) {
	spec := JobSpec{Tasks: 40, SamplesPerResource: 5000, StartMs: Start}
	whole := NewStream("a", spec, 7).Job()
	s := NewStream("a", spec, 7)
	var c Chunk
	var got []JobSeries
	for s.Next(&c, 37) {
		for r, res := range c.Resources {
			n := len(got)
			if n > 0 && got[n-1].Task == c.Task && got[n-1].Resource == res {
				got[n-1].Ts = append(got[n-1].Ts, c.Ts...)
				got[n-1].Vs = append(got[n-1].Vs, c.Vs[r]...)
				continue
			}
			// Resources interleave within a task: find the series.
			found := false
			for i := range got {
				if got[i].Task == c.Task && got[i].Resource == res {
					got[i].Ts = append(got[i].Ts, c.Ts...)
					got[i].Vs = append(got[i].Vs, c.Vs[r]...)
					found = true
				}
			}
			if !found {
				got = append(got, JobSeries{Resource: res, Task: c.Task, Ts: slices.Clone(c.Ts), Vs: slices.Clone(c.Vs[r])})
			}
		}
	}
	if len(got) != len(whole.Series) {
		t.Fatalf("chunked stream has %d series, whole job %d", len(got), len(whole.Series))
	}
	for i := range got {
		if !slices.Equal(got[i].Ts, whole.Series[i].Ts) || !slices.Equal(got[i].Vs, whole.Series[i].Vs) {
			t.Fatalf("series %d (%s of task %d) differs between chunk sizes", i, got[i].Resource, got[i].Task)
		}
	}
}

func TestStreamInvariants(t *testing.T) {
	f := func(samples, tasks int) {
		t.Helper()
		s := NewStream("j", JobSpec{Tasks: tasks, SamplesPerResource: samples, StartMs: Start}, 1)
		if len(s.Tasks) != tasks {
			t.Fatalf("%s: %d tasks, want %d", JobName(samples, tasks), len(s.Tasks), tasks)
		}
		var c Chunk
		last := int64(0)
		n := 0
		for s.Next(&c, 1000) {
			tk := s.Tasks[c.Task]
			for _, ts := range c.Ts {
				if ts <= last || ts < tk.StartMs {
					t.Fatalf("%s: sample at %d after %d, task start %d", JobName(samples, tasks), ts, last, tk.StartMs)
				}
				if c.Task+1 < len(s.Tasks) && ts >= s.Tasks[c.Task+1].StartMs {
					t.Fatalf("%s: sample at %d not before the next task's start %d", JobName(samples, tasks), ts, s.Tasks[c.Task+1].StartMs)
				}
				last = ts
			}
			n += len(c.Ts)
		}
		if n != samples || s.Produced() != samples {
			t.Fatalf("%s: %d samples per resource, want %d", JobName(samples, tasks), n, samples)
		}
		if s.LastEventMs < last {
			t.Fatalf("%s: last event %d before the last sample %d", JobName(samples, tasks), s.LastEventMs, last)
		}
	}
	f(1000, 10)
	f(1000, 50_000)
	f(100_000, 100)
	f(7, 3)
}

func TestStreamUntil(t *testing.T) {
	s := NewStream("live", JobSpec{Tasks: 5, SamplesPerResource: 400, StartMs: Start}, 2)
	var c Chunk
	until := Start + 30_000
	n := 0
	for s.NextUntil(&c, 0, until) {
		for _, ts := range c.Ts {
			if ts > until {
				t.Fatalf("sample at %d after %d", ts, until)
			}
		}
		n += len(c.Ts)
	}
	if n == 0 || n >= 400 {
		t.Fatalf("30 s of a 100 s job gave %d samples", n)
	}
	for s.Next(&c, 0) {
		n += len(c.Ts)
	}
	if n != 400 {
		t.Fatalf("got %d samples in all, want 400", n)
	}
}

func TestSizeNames(t *testing.T) {
	for _, n := range SampleSizes {
		got, err := ParseSize(SizeName(n))
		if err != nil || got != n {
			t.Fatalf("ParseSize(SizeName(%d)) = %d, %v", n, got, err)
		}
	}
	if JobName(1_000_000, 200) != "1e6x200" || SizeName(2500) != "2500" {
		t.Fatalf("names: %s %s", JobName(1_000_000, 200), SizeName(2500))
	}
	if _, err := ParseSize("1.5"); err == nil {
		t.Fatal("ParseSize(1.5) did not fail")
	}
}
