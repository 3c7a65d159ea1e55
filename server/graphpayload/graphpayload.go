// Package graphpayload owns the two JSON documents a job's graph page
// reads: the graph (downsampled lines per resource, the peak, the tasks the
// points refer to) and the tasks list, with exact per-task statistics, the
// AWX job-event counter range of each task and the events URL. Field names
// and JSON tags are the API contract.
//
// It assembles them from plain columns and task spans: it does not read
// the store, speak HTTP or choose points itself (downsample.Select does).
// Its size is O(points × resources) plus the tasks that points refer to
// and the heaviest tasks, whatever the raw sample and task counts.
package graphpayload

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/peakline/peakline/downsample"
)

// Payload limits.
const (
	DefaultPoints = 1000
	MaxPoints     = 10000
	MinPoints     = 2
	// heaviestPerResource is how many tasks per resource, by max, the
	// payload lists even when no point refers to them.
	heaviestPerResource = 5
)

// ErrPoints is returned for a point count outside [MinPoints, MaxPoints].
var ErrPoints = errors.New("points out of range")

// Column is one resource of a job as parallel slices. Ts strictly
// increases; Task[i] indexes the TaskSpan that sample i belongs to.
type Column struct {
	Resource string // "cpu", "memory", "pids"
	Unit     string
	Ts       []int64
	Vs       []float64
	Task     []int32
}

// TaskSpan is one task of a job, ordered by start in the input slice.
type TaskSpan struct {
	Counter int64 // counter of its task-start event; 0 when unknown
	UUID    string
	Name    string
	StartMs int64
	EndMs   int64
	// Waited is the task's share of its wall time stalled, by signal
	// (see TaskSummary.Waited); nil when the job measured none. The
	// payload shares the map.
	Waited map[string]float64
}

// GraphRequest says what window and resolution to build.
type GraphRequest struct {
	JobID     string
	Points    int    // 0 means DefaultPoints
	Algorithm string // "" means downsample.Default
	FromMs    int64  // window as served; the columns hold only its samples
	ToMs      int64
	// LastCounter is the counter of the job's newest event, the end of the
	// last task's event range; 0 when unknown.
	LastCounter int64
	EventsURL   string // with {job_id} already filled in, or ""
}

// Payload is the graph document.
type Payload struct {
	JobID     string        `json:"job_id"`
	Points    int           `json:"points"`
	Algorithm string        `json:"algorithm"`
	From      int64         `json:"from"`
	To        int64         `json:"to"`
	Series    []SeriesPlot  `json:"series"`
	Tasks     []TaskSummary `json:"tasks"`
	EventsURL string        `json:"events_url,omitempty"`
	// JobURL is the AWX UI page of the job's output (serve
	// --awx-ui-url), the page an operator reads a task's events on;
	// left out when not configured or the job is no AWX job. The
	// server fills it in.
	JobURL string `json:"job_url,omitempty"`
	// The job's template, when it has one (left out otherwise), so the
	// job page can show how the run compares with the template's other
	// runs. BuildGraph leaves them empty: the server fills them in.
	TemplateID   string `json:"template_id,omitempty"`
	TemplateName string `json:"template_name,omitempty"`
	// Measured is how the samples were measured, when the sender said:
	// "cgroup" or "process-tree" (sums over the job's processes; the job
	// page notes it). The server fills it in.
	Measured string `json:"measured,omitempty"`
	// Sizing is what the job's info says of its memory limit, OOM kills
	// and forks; absent when it says none of it. The server fills it in.
	Sizing *Sizing `json:"sizing,omitempty"`
	// Status is the job's state: running, successful, failed, canceled
	// or unknown; ReportedStatus the status its sender reported, when
	// it did (e.g. AWX's "error" for a failed job). End is when the job
	// ended (unix ms: the last time it shows, see tsdb.Job.Span), set
	// only when its status says it ended: a running job, or one of
	// unknown status, has no end. The server fills them in.
	Status         string `json:"status,omitempty"`
	ReportedStatus string `json:"reported_status,omitempty"`
	End            int64  `json:"end,omitempty"`
	// Pressure is, per stall signal the job measured, the share of each
	// sample interval it stalled (see Pressure): the job page draws it
	// as a band behind the CPU and memory lines. Absent for a job
	// without stall samples. BuildGraph leaves it empty: the server
	// fills it in.
	Pressure []PressureBand `json:"pressure,omitempty"`
}

// Sizing is what a job's info says of its resources and inputs (the
// jobs list carries it too); each field is left out where unknown.
type Sizing struct {
	Forks            int   `json:"forks,omitempty"`
	Hosts            int   `json:"hosts,omitempty"`
	MemoryLimitBytes int64 `json:"memory_limit_bytes,omitempty"`
	// OOMKills counts the OOM kills in the job's cgroup; OOMCounter is
	// the counter of the task running at the last one (0 unknown).
	OOMKills   int   `json:"oom_kills,omitempty"`
	OOMCounter int64 `json:"oom_counter,omitempty"`
	// AtCap marks a job whose memory peak over the whole job (PeakBytes)
	// reached the right-sizing's at-cap share of its limit.
	AtCap           bool   `json:"at_cap,omitempty"`
	PeakBytes       int64  `json:"peak_bytes,omitempty"`
	ProjectRevision string `json:"project_revision,omitempty"`
	EEImage         string `json:"ee_image,omitempty"`
}

// SeriesPlot is the downsampled line of one resource.
type SeriesPlot struct {
	Resource   string    `json:"resource"`
	Unit       string    `json:"unit"`
	RawSamples int       `json:"raw_samples"`
	T          []int64   `json:"t"`
	V          []float64 `json:"v"`
	Counter    []int64   `json:"counter"`
	Peak       *Peak     `json:"peak,omitempty"`
}

// Peak is the exact high-water mark of a resource in the window.
type Peak struct {
	T       int64   `json:"t"`
	V       float64 `json:"v"`
	Counter int64   `json:"counter"`
}

// TaskList is the tasks document: every task of a job with exact
// statistics over the whole job.
type TaskList struct {
	JobID     string        `json:"job_id"`
	Tasks     []TaskSummary `json:"tasks"`
	EventsURL string        `json:"events_url,omitempty"`
	JobURL    string        `json:"job_url,omitempty"` // as Payload.JobURL
}

// EventRange is the counter range of a task's job events.
type EventRange struct {
	CounterGTE int64 `json:"counter_gte"`
	CounterLTE int64 `json:"counter_lte"`
}

// TaskSummary is a task with exact per-resource statistics over the
// samples it owns in the window. Resources without samples are left out
// of the maps.
type TaskSummary struct {
	Counter int64              `json:"counter"`
	UUID    string             `json:"uuid"`
	Name    string             `json:"name"`
	Start   int64              `json:"start"`
	End     int64              `json:"end"`
	Events  *EventRange        `json:"events"`
	Samples map[string]int     `json:"samples"`
	Max     map[string]float64 `json:"max"`
	Mean    map[string]float64 `json:"mean"`
	// Waited is the share (0–1) of the task's wall time it was stalled:
	// "cpu" waiting for a CPU, "memory" on memory, "throttled" by its CPU
	// limit, "node_cpu" some task of the node waiting for a CPU;
	// "node_load" is the node's mean load per CPU (no PSI). Absent
	// figures are left out; absent with none.
	Waited map[string]float64 `json:"waited,omitempty"`
}

// taskStat accumulates one task's statistics for one resource.
type taskStat struct {
	n     int
	sum   float64
	max   float64
	maxAt int // index into the column
}

// Summaries computes every task's exact statistics over the given columns
// and its event range. lastCounter ends the last task's range (0: unknown).
func Summaries(cols []Column, tasks []TaskSpan, lastCounter int64) []TaskSummary {
	stats := columnStats(cols, len(tasks))
	ranges := eventRanges(tasks, lastCounter)
	out := make([]TaskSummary, len(tasks))
	for i, t := range tasks {
		out[i] = summary(t, ranges[i], cols, stats, i)
	}
	return out
}

func summary(t TaskSpan, r *EventRange, cols []Column, stats [][]taskStat, i int) TaskSummary {
	s := TaskSummary{
		Counter: t.Counter, UUID: t.UUID, Name: t.Name, Start: t.StartMs, End: t.EndMs, Events: r, Waited: t.Waited,
		Samples: map[string]int{}, Max: map[string]float64{}, Mean: map[string]float64{},
	}
	for c, col := range cols {
		st := stats[c][i]
		if st.n == 0 {
			continue
		}
		s.Samples[col.Resource] = st.n
		s.Max[col.Resource] = st.max
		s.Mean[col.Resource] = st.sum / float64(st.n)
	}
	return s
}

// columnStats returns, per column and task, the finite samples' count,
// sum and first maximum.
func columnStats(cols []Column, nTasks int) [][]taskStat {
	out := make([][]taskStat, len(cols))
	// Columns are independent: large ones are summed on goroutines of
	// their own, each writing only its own out[c].
	var wg sync.WaitGroup
	for c, col := range cols {
		if len(col.Vs) >= parallelStats && c+1 < len(cols) {
			wg.Go(func() { out[c] = taskStats(col, nTasks) })
			continue
		}
		out[c] = taskStats(col, nTasks)
	}
	wg.Wait()
	return out
}

// parallelStats is the column length from which columnStats sums a
// column on a goroutine of its own.
const parallelStats = 1 << 16

// taskStats returns, per task, the finite samples' count, sum and first
// maximum in one column.
func taskStats(col Column, nTasks int) []taskStat {
	st := make([]taskStat, nTasks)
	// A task's samples are one stretch of the column but where tasks
	// overlap: each stretch of one task is summed in a tight loop,
	// in column order, so sums are those of one pass.
	for lo := 0; lo < len(col.Vs); {
		ti := col.Task[lo]
		hi := lo + 1
		for hi < len(col.Vs) && col.Task[hi] == ti {
			hi++
		}
		if ti >= 0 && int(ti) < nTasks {
			st[ti].add(col.Vs, lo, hi)
		}
		lo = hi
	}
	return st
}

// add takes the finite values of vs[lo:hi] into s.
func (s *taskStat) add(vs []float64, lo, hi int) {
	n, sum, mx, at := s.n, s.sum, s.max, s.maxAt
	for i, v := range vs[lo:hi] {
		if !finite(v) {
			continue
		}
		if n == 0 || v > mx {
			mx, at = v, lo+i
		}
		n++
		sum += v
	}
	s.n, s.sum, s.max, s.maxAt = n, sum, mx, at
}

// eventRanges gives each task with a known counter the range from its
// counter to the next task's counter − 1; the last task's range ends at
// lastCounter (or its own counter when that is unknown).
func eventRanges(tasks []TaskSpan, lastCounter int64) []*EventRange {
	order := make([]int, 0, len(tasks))
	for i, t := range tasks {
		if t.Counter > 0 {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(tasks[a].Counter, tasks[b].Counter) })
	out := make([]*EventRange, len(tasks))
	for k, i := range order {
		r := &EventRange{CounterGTE: tasks[i].Counter, CounterLTE: max(tasks[i].Counter, lastCounter)}
		if k+1 < len(order) {
			r.CounterLTE = max(tasks[i].Counter, tasks[order[k+1]].Counter-1)
		}
		out[i] = r
	}
	return out
}

// BuildGraph assembles the payload. The columns must hold only the
// window's samples. The caller keeps ownership of cols and tasks.
func BuildGraph(req GraphRequest, cols []Column, tasks []TaskSpan) (*Payload, error) {
	n := req.Points
	if n == 0 {
		n = DefaultPoints
	}
	if n < MinPoints || n > MaxPoints {
		return nil, fmt.Errorf("%w: points must be between %d and %d, got %d", ErrPoints, MinPoints, MaxPoints, n)
	}
	algo := req.Algorithm
	if algo == "" {
		algo = downsample.Default
	}
	stats := columnStats(cols, len(tasks))
	p := &Payload{
		JobID: req.JobID, Points: n, Algorithm: algo, From: req.FromMs, To: req.ToMs,
		Series: make([]SeriesPlot, 0, len(cols)), EventsURL: req.EventsURL,
	}
	include := make([]bool, len(tasks))
	var idx, keep []int
	for c, col := range cols {
		if len(col.Ts) == 0 {
			continue
		}
		keep = heaviestMaxima(keep[:0], stats[c], n/4)
		var err error
		idx, err = downsample.Select(idx[:0], algo, col.Ts, col.Vs, n, keep)
		if err != nil {
			return nil, err
		}
		sp := SeriesPlot{
			Resource: col.Resource, Unit: col.Unit, RawSamples: len(col.Ts),
			T: make([]int64, len(idx)), V: make([]float64, len(idx)), Counter: make([]int64, len(idx)),
		}
		for k, i := range idx {
			ti := col.Task[i]
			sp.T[k], sp.V[k], sp.Counter[k] = col.Ts[i], col.Vs[i], tasks[ti].Counter
			include[ti] = true
		}
		if at := peakIndex(col.Vs); at >= 0 {
			sp.Peak = &Peak{T: col.Ts[at], V: col.Vs[at], Counter: tasks[col.Task[at]].Counter}
			include[col.Task[at]] = true
		}
		for _, i := range heaviestTasks(stats[c], heaviestPerResource) {
			include[i] = true
		}
		p.Series = append(p.Series, sp)
	}
	ranges := eventRanges(tasks, req.LastCounter)
	p.Tasks = make([]TaskSummary, 0)
	for i, t := range tasks {
		if include[i] {
			p.Tasks = append(p.Tasks, summary(t, ranges[i], cols, stats, i))
		}
	}
	return p, nil
}

// peakIndex returns the index of the first finite maximum, or -1.
func peakIndex(vs []float64) int {
	at := -1
	for i, v := range vs {
		if !finite(v) {
			continue
		}
		if at < 0 || v > vs[at] {
			at = i
		}
	}
	return at
}

// heaviestTasks returns the indices of up to k tasks with the highest max.
func heaviestTasks(st []taskStat, k int) []int {
	order := make([]int, 0, len(st))
	for i := range st {
		if st[i].n > 0 {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(st[b].max, st[a].max) })
	return order[:min(k, len(order))]
}

// heaviestMaxima appends the column indices of the maxima of up to k
// tasks, the heaviest first chosen, sorted ascending for Select.
func heaviestMaxima(dst []int, st []taskStat, k int) []int {
	for _, i := range heaviestTasks(st, k) {
		dst = append(dst, st[i].maxAt)
	}
	slices.Sort(dst)
	return slices.Compact(dst)
}

// finite reports whether v is neither NaN nor infinite: the floats whose
// exponent bits are not all ones (one test per sample of a whole job).
func finite(v float64) bool { return math.Float64bits(v)&expMask != expMask }

const expMask = 0x7ff0000000000000 // exponent bits of a float64
