package graphpayload

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

func TestEventRanges(t *testing.T) {
	f := func(counters []int64, last int64, want []*EventRange) {
		t.Helper()
		tasks := make([]TaskSpan, len(counters))
		for i, c := range counters {
			tasks[i] = TaskSpan{Counter: c}
		}
		got := eventRanges(tasks, last)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("eventRanges(%v, %d) = %s, want %s", counters, last, show(got), show(want))
		}
	}
	// In counter order: each range ends before the next task's start.
	f([]int64{3, 6, 9}, 12, []*EventRange{{3, 5}, {6, 8}, {9, 12}})
	// Unknown counters (0) get no range and do not cut another's.
	f([]int64{3, 0, 9}, 0, []*EventRange{{3, 8}, nil, {9, 9}})
	// Tasks listed by start, counters out of order (handlers).
	f([]int64{10, 4}, 20, []*EventRange{{10, 20}, {4, 9}})
	// Adjacent counters: a one-event range.
	f([]int64{5, 6}, 6, []*EventRange{{5, 5}, {6, 6}})
	f(nil, 7, []*EventRange{})
}

func show(rs []*EventRange) string {
	b, _ := json.Marshal(rs)
	return string(b)
}

// TestBuildGraph checks the document of a small two-task job: the
// points, the peak, the exact per-task statistics and event ranges, and
// the JSON names a client reads.
func TestBuildGraph(t *testing.T) {
	cols := []Column{{Resource: "cpu", Unit: "percent",
		Ts: []int64{100, 200, 300, 400}, Vs: []float64{10, 50, 20, 30}, Task: []int32{0, 0, 1, 1}}}
	tasks := []TaskSpan{{Counter: 3, UUID: "a", Name: "one", StartMs: 90, EndMs: 250}, {Counter: 7, UUID: "b", Name: "two", StartMs: 250, EndMs: 450}}
	req := GraphRequest{JobID: "42", Points: 10, Algorithm: "lttb", FromMs: 90, ToMs: 450, LastCounter: 9, EventsURL: "https://awx/{counter_gte}"}
	p, err := BuildGraph(req, cols, tasks)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"job_id":"42","points":10,"algorithm":"lttb","from":90,"to":450,` +
		`"series":[{"resource":"cpu","unit":"percent","raw_samples":4,"t":[100,200,300,400],"v":[10,50,20,30],"counter":[3,3,7,7],"peak":{"t":200,"v":50,"counter":3}}],` +
		`"tasks":[{"counter":3,"uuid":"a","name":"one","start":90,"end":250,"events":{"counter_gte":3,"counter_lte":6},"samples":{"cpu":2},"max":{"cpu":50},"mean":{"cpu":30}},` +
		`{"counter":7,"uuid":"b","name":"two","start":250,"end":450,"events":{"counter_gte":7,"counter_lte":9},"samples":{"cpu":2},"max":{"cpu":30},"mean":{"cpu":25}}],` +
		`"events_url":"https://awx/{counter_gte}"}`
	if string(got) != want {
		t.Fatalf("payload\n got %s\nwant %s", got, want)
	}
	if _, err := BuildGraph(GraphRequest{Points: MaxPoints + 1}, cols, tasks); !errors.Is(err, ErrPoints) {
		t.Fatalf("points %d: error %v, want ErrPoints", MaxPoints+1, err)
	}
}

func TestFinite(t *testing.T) {
	f := func(v float64, want bool) {
		t.Helper()
		if got := finite(v); got != want {
			t.Fatalf("finite(%v) = %v, want %v", v, got, want)
		}
	}
	f(0, true)
	f(math.Copysign(0, -1), true)
	f(math.MaxFloat64, true)
	f(-math.MaxFloat64, true)
	f(math.SmallestNonzeroFloat64, true)
	f(math.Inf(1), false)
	f(math.Inf(-1), false)
	f(math.NaN(), false)
	f(math.Float64frombits(0x7ff0000000000002), false) // the stale marker's NaN
	f(math.Float64frombits(0xfff8000000000001), false)
}

// TestColumnStatsMatchesOnePass compares columnStats with one plain pass
// per column, exactly (sums in the same order), on columns large enough
// to be summed in parallel, where tasks come in stretches that
// interleave, samples name tasks outside the list, and values include
// NaN, infinities and equal maxima (the first one counts).
func TestColumnStatsMatchesOnePass(t *testing.T) {
	const nTasks = 7
	rng := rand.New(rand.NewPCG(14, 2))
	specials := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 5, 5}
	cols := make([]Column, 3)
	for c := range cols {
		n := parallelStats + rng.IntN(3*parallelStats)
		col := Column{Ts: make([]int64, n), Vs: make([]float64, n), Task: make([]int32, n)}
		task := int32(0)
		for i := range n {
			if rng.IntN(500) == 0 {
				task = int32(rng.IntN(nTasks+2)) - 1 // -1 and nTasks name no task
			}
			col.Ts[i], col.Task[i] = int64(i), task
			col.Vs[i] = rng.NormFloat64()
			if rng.IntN(100) == 0 {
				col.Vs[i] = specials[rng.IntN(len(specials))]
			}
		}
		cols[c] = col
	}
	got := columnStats(cols, nTasks)
	for c, col := range cols {
		want := make([]taskStat, nTasks)
		for i, v := range col.Vs {
			ti := col.Task[i]
			if !finite(v) || ti < 0 || int(ti) >= nTasks {
				continue
			}
			s := &want[ti]
			if s.n == 0 || v > s.max {
				s.max, s.maxAt = v, i
			}
			s.n++
			s.sum += v
		}
		if !reflect.DeepEqual(got[c], want) {
			t.Fatalf("column %d: columnStats = %+v, want %+v", c, got[c], want)
		}
		if want[0].n == 0 {
			t.Fatalf("column %d: task 0 has no samples: the case does not test anything", c)
		}
	}
}
