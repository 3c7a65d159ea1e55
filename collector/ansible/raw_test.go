package ansible

// An independent, naive read of the real trees: string splitting and maps
// instead of the package's parsers, a linear scan instead of its binary
// search. Read must agree with it sample for sample.

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

type rawPoint struct {
	resource string
	counter  int64
	ms       int64
	value    float64 // stored unit
}

type rawStart struct {
	counter int64
	ms      int64
	uuid    string
}

// rawStarts reads the task start events of a job_events dir naively.
func rawStarts(t *testing.T, dir string) []rawStart {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []rawStart
	for _, name := range names {
		var ev map[string]any
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			t.Fatal(err)
		}
		if ev["event"] != "playbook_on_task_start" {
			continue
		}
		created, err := time.Parse("2006-01-02T15:04:05.999999", ev["created"].(string))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rawStart{
			counter: int64(ev["counter"].(float64)),
			ms:      created.Round(time.Millisecond).UnixMilli(),
			uuid:    ev["event_data"].(map[string]any)["task_uuid"].(string),
		})
	}
	return out
}

// rawCounter attributes a sample by scanning every start.
func rawCounter(starts []rawStart, ms int64, uuid string) int64 {
	var best *rawStart
	for i, s := range starts {
		if s.ms <= ms && (best == nil || s.ms > best.ms || s.ms == best.ms && s.counter > best.counter) {
			best = &starts[i]
		}
	}
	if best != nil {
		return best.counter
	}
	return 0
}

// rawPoints reads every plugin file in dir naively: JSON-seq by splitting
// on 0x1E, CSV by splitting on CRLF and commas (the real trees' task names
// hold no commas). Without starts, the counter is 0.
func rawPoints(t *testing.T, dir string, starts []rawStart) (points []rawPoint, perUUID map[string]int) {
	t.Helper()
	perUUID = make(map[string]int)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		resource := ""
		for _, r := range []string{"cpu", "memory", "pids"} {
			if strings.HasSuffix(e.Name(), "-"+r+".json") || e.Name() == r+".csv" {
				resource = r
			}
		}
		if resource == "" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var recs [][3]string // timestamp, uuid, value
		if strings.HasSuffix(e.Name(), ".csv") {
			for _, line := range strings.Split(string(data), "\r\n") {
				if f := strings.Split(line, ","); len(f) == 4 {
					recs = append(recs, [3]string{f[0], f[2], f[3]})
				}
			}
		} else {
			for _, rec := range strings.Split(string(data), "\x1e")[1:] {
				d := json.NewDecoder(strings.NewReader(rec))
				d.UseNumber()
				var m map[string]any
				if err := d.Decode(&m); err != nil {
					t.Fatalf("%s: %v", e.Name(), err)
				}
				recs = append(recs, [3]string{m["timestamp"].(json.Number).String(), m["task_uuid"].(string), m["value"].(json.Number).String()})
			}
		}
		for _, r := range recs {
			ts, err1 := strconv.ParseFloat(r[0], 64)
			v, err2 := strconv.ParseFloat(r[2], 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("%s: %q", e.Name(), r)
			}
			if resource == "memory" {
				v *= 1024 * 1024
			}
			ms := int64(math.Round(ts * 1000))
			points = append(points, rawPoint{resource, rawCounter(starts, ms, r[1]), ms, v})
			perUUID[resource+" "+r[1]]++
		}
	}
	return points, perUUID
}

func jobPoints(job *Job) []rawPoint {
	var out []rawPoint
	for _, s := range job.Series {
		for i := range s.Ts {
			out = append(out, rawPoint{s.Resource, s.Counter, s.Ts[i], s.Vs[i]})
		}
	}
	return out
}

func sortPoints(p []rawPoint) {
	slices.SortFunc(p, func(a, b rawPoint) int {
		return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
	})
}

func readOne(t *testing.T, path string) *Job {
	t.Helper()
	jobs, err := Read(path, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 {
		t.Fatalf("got %d jobs, want 1", len(jobs))
	}
	return jobs[0]
}

// TestReadMatchesRawFiles checks every sample Read returns (time, value in
// bytes for memory, counter) against the naive read.
func TestReadMatchesRawFiles(t *testing.T) {
	cases := []struct{ tree, ident, plugin string }{
		{"runner-basic", "demo2", "profiling_data"},
		{"runner-loops", "loops", "profiling_data"},
		{"recap-csv", "", "ansible-perf-2026-11-30T03:39:20.072139"},
	}
	for _, tc := range cases {
		t.Run(tc.tree, func(t *testing.T) {
			var starts []rawStart
			if tc.ident != "" {
				starts = rawStarts(t, filepath.Join(realTree(tc.tree), "artifacts", tc.ident, "job_events"))
			}
			want, _ := rawPoints(t, filepath.Join(realTree(tc.tree), tc.plugin), starts)
			got := jobPoints(readOne(t, realTree(tc.tree)))
			sortPoints(want)
			sortPoints(got)
			if !slices.Equal(got, want) {
				t.Errorf("Read and the raw files disagree:\n got %v\nwant %v", got, want)
			}
		})
	}
}

// seriesCounts is samples per "resource counter" or "resource uuid".
func seriesCounts(job *Job, byUUID bool) map[string]int {
	out := make(map[string]int)
	for _, s := range job.Series {
		key := fmt.Sprintf("%s %d", s.Resource, s.Counter)
		if byUUID {
			key = s.Resource + " " + s.UUID
		}
		out[key] += len(s.Ts)
	}
	return out
}

func TestRealTreeCounts(t *testing.T) {
	t.Run("runner-basic", func(t *testing.T) {
		job := readOne(t, realTree("runner-basic"))
		want := map[string]int{
			"cpu 3": 13, "cpu 6": 9, // say hello's cpu file is empty
			"memory 3": 14, "memory 6": 10, "memory 9": 1,
			"pids 3": 14, "pids 6": 10, "pids 9": 1,
		}
		if got := seriesCounts(job, false); !maps.Equal(got, want) {
			t.Errorf("samples per task: got %v, want %v", got, want)
		}
		// 0-…-memory.json's first record: 64.328125 MiB.
		if s := job.Series[2]; s.Resource != "memory" || s.Ts[0] != 1796009975985 || s.Vs[0] != 67452928 {
			t.Errorf("first memory sample: got %s %d %v, want memory 1796009975985 67452928", s.Resource, s.Ts[0], s.Vs[0])
		}
	})
	t.Run("runner-loops", func(t *testing.T) {
		job := readOne(t, realTree("runner-loops"))
		want := map[string]int{
			"cpu 3": 14, "cpu 10": 1, "cpu 23": 4, "cpu 26": 4, "cpu 29": 8,
			"memory 3": 15, "memory 10": 2, "memory 13": 1, "memory 16": 1, "memory 23": 5, "memory 26": 5, "memory 29": 8,
			"pids 3": 15, "pids 10": 2, "pids 13": 1, "pids 16": 1, "pids 23": 5, "pids 26": 5, "pids 29": 8,
		}
		if got := seriesCounts(job, false); !maps.Equal(got, want) {
			t.Errorf("samples per task: got %v, want %v", got, want)
		}
		// The plugin filed the handler's samples under "included sleep,
		// item b"; by time they are the handler's (counter 29), and its
		// 150 MiB bytearray shows there only.
		for _, s := range job.Series {
			if s.Resource == "memory" && s.Counter != 29 && slices.Max(s.Vs) > 200<<20 {
				t.Errorf("counter %d (%s) holds the handler's memory peak %v", s.Counter, s.Task, slices.Max(s.Vs))
			}
			if s.Resource == "memory" && s.Counter == 29 && slices.Max(s.Vs) < 200<<20 {
				t.Errorf("handler memory peak %v, want > 200 MiB", slices.Max(s.Vs))
			}
		}
	})
	t.Run("recap-csv", func(t *testing.T) {
		job := readOne(t, realTree("recap-csv"))
		_, want := rawPoints(t, filepath.Join(realTree("recap-csv"), "ansible-perf-2026-11-30T03:39:20.072139"), nil)
		if got := seriesCounts(job, true); !maps.Equal(got, want) {
			t.Errorf("samples per task uuid: got %v, want %v", got, want)
		}
		for _, s := range job.Series {
			if s.Counter != 0 {
				t.Errorf("series %s %s: counter %d without job events, want 0", s.Resource, s.Task, s.Counter)
			}
		}
	})
}
