package bench

import (
	"bytes"
	"compress/gzip"
	"container/heap"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/peakline/peakline/bench/workload"
	"github.com/peakline/peakline/collector/ship"
	"github.com/peakline/peakline/tsdb"
)

// ingestSet is one workload encoded for every ingest endpoint, split into
// shards the way a Prometheus remote-write queue splits series: each
// shard's bodies are sent in order by one sender, so every series' samples
// arrive in time order. All encodings carry the same samples, task
// records and last events.
type ingestSet struct {
	samples int        // every sample, task and last-event records included
	rw      [][][]byte // remote write 1.0: snappy prompb.WriteRequest
	plJSON  [][][]byte // Peakline JSON ingest batches, gzip
	vmJSON  [][][]byte // VictoriaMetrics /api/v1/import JSON lines, gzip, batched like plJSON
}

// ingestSpec sizes an ingest workload: jobs running at once, each of
// samplesPerJob samples per resource over tasks tasks.
type ingestSpec struct {
	jobs, samplesPerJob, tasks int
	batch                      int   // samples per request
	shards                     int   // concurrent senders
	endMs                      int64 // the newest sample's time, about
	seed                       int64
}

// jobStreams makes the jobs of spec, all starting at the same time so
// that the newest sample is near endMs.
func (s ingestSpec) jobStreams() []*workload.Stream {
	out := make([]*workload.Stream, s.jobs)
	var span int64
	for i := range out {
		out[i] = workload.NewStream(fmt.Sprintf("ingest-%d", i), workload.JobSpec{Tasks: s.tasks, SamplesPerResource: s.samplesPerJob}, s.seed+int64(i))
		span = max(span, out[i].LastEventMs-out[i].Tasks[0].StartMs)
	}
	start := s.endMs - span
	for i := range out {
		out[i] = workload.NewStream(out[i].ID, workload.JobSpec{Tasks: s.tasks, SamplesPerResource: s.samplesPerJob, StartMs: start}, s.seed+int64(i))
	}
	return out
}

// streamHeap orders job streams by the time they have reached.
type streamHeap struct {
	s  []*workload.Stream
	at []int64
}

func (h *streamHeap) Len() int           { return len(h.s) }
func (h *streamHeap) Less(i, j int) bool { return h.at[i] < h.at[j] }
func (h *streamHeap) Swap(i, j int) {
	h.s[i], h.s[j] = h.s[j], h.s[i]
	h.at[i], h.at[j] = h.at[j], h.at[i]
}
func (h *streamHeap) Push(x any) { panic("unused") }
func (h *streamHeap) Pop() any {
	n := len(h.s) - 1
	x := h.s[n]
	h.s, h.at = h.s[:n], h.at[:n]
	return x
}

// eachChunk calls f with the chunks of all streams, merged in time order
// (chunks of at most per samples per resource), and with last = true once
// per stream after its final chunk (c nil).
func eachChunk(streams []*workload.Stream, per int, f func(s *workload.Stream, c *workload.Chunk, last bool) error) error {
	h := &streamHeap{}
	for _, s := range streams {
		s.Reset()
		h.s = append(h.s, s)
		h.at = append(h.at, s.Tasks[0].StartMs)
	}
	heap.Init(h)
	var c workload.Chunk
	for h.Len() > 0 {
		s := h.s[0]
		if !s.Next(&c, per) {
			heap.Pop(h)
			if err := f(s, nil, true); err != nil {
				return err
			}
			continue
		}
		h.at[0] = c.Ts[len(c.Ts)-1]
		heap.Fix(h, 0)
		if err := f(s, &c, false); err != nil {
			return err
		}
	}
	return nil
}

// seriesLabels are the labels of a sample series in the Peakline schema,
// sorted by name as remote write requires.
func seriesLabels(metric, job string, t workload.Task) []prompb.Label {
	return []prompb.Label{{Name: "__name__", Value: metric}, {Name: tsdb.LabelCounter, Value: strconv.FormatInt(t.Counter, 10)},
		{Name: tsdb.LabelJob, Value: job}, {Name: tsdb.LabelTask, Value: t.Name}, {Name: tsdb.LabelTaskUUID, Value: t.UUID}}
}

func metricOf(resource string) string {
	for _, r := range tsdb.GraphedResources() {
		if r.Name == resource {
			return r.Metric
		}
	}
	return ""
}

func shardOf(key string, shards int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(shards))
}

// rwShard gathers one shard's pending remote-write request.
type rwShard struct {
	req     prompb.WriteRequest
	index   map[string]int // series key -> position in req.Timeseries
	pending int
	bodies  [][]byte
}

func (r *rwShard) add(key string, ls []prompb.Label, ts []int64, vs []float64) {
	if r.index == nil {
		r.index = map[string]int{}
	}
	i, ok := r.index[key]
	if !ok {
		i = len(r.req.Timeseries)
		r.index[key] = i
		r.req.Timeseries = append(r.req.Timeseries, prompb.TimeSeries{Labels: ls})
	}
	for k := range ts {
		r.req.Timeseries[i].Samples = append(r.req.Timeseries[i].Samples, prompb.Sample{Timestamp: ts[k], Value: vs[k]})
	}
	r.pending += len(ts)
}

func (r *rwShard) flush() error {
	if r.pending == 0 {
		return nil
	}
	raw, err := r.req.Marshal()
	if err != nil {
		return fmt.Errorf("marshal write request: %w", err)
	}
	r.bodies = append(r.bodies, snappy.Encode(nil, raw))
	r.req, r.index, r.pending = prompb.WriteRequest{}, nil, 0
	return nil
}

// jsonJob gathers one job's pending JSON batch.
type jsonJob struct {
	batch    ship.Batch
	vmLines  bytes.Buffer
	pending  int
	nextTask int
}

// vmLine is one line of VictoriaMetrics' JSON import format.
type vmLine struct {
	Metric     map[string]string `json:"metric"`
	Values     []float64         `json:"values"`
	Timestamps []int64           `json:"timestamps"`
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes()
}

// buildIngestSet generates the workload once and encodes it for every
// endpoint.
func buildIngestSet(spec ingestSpec) (*ingestSet, error) {
	set := &ingestSet{plJSON: make([][][]byte, spec.shards), vmJSON: make([][][]byte, spec.shards)}
	rw := make([]rwShard, spec.shards)
	streams := spec.jobStreams()
	jobs := make(map[string]*jsonJob, len(streams))
	jobShard := map[string]int{}
	for i, s := range streams {
		jobs[s.ID] = &jsonJob{batch: ship.Batch{JobID: s.ID}}
		jobShard[s.ID] = i % spec.shards
	}
	addVM := func(j *jsonJob, labels []prompb.Label, ts []int64, vs []float64) error {
		m := make(map[string]string, len(labels))
		for _, l := range labels {
			m[l.Name] = l.Value
		}
		b, err := json.Marshal(vmLine{Metric: m, Values: vs, Timestamps: ts})
		if err != nil {
			return err
		}
		j.vmLines.Write(b)
		j.vmLines.WriteByte('\n')
		return nil
	}
	flushJSON := func(id string) error {
		j := jobs[id]
		if j.pending == 0 && len(j.batch.Tasks) == 0 && j.batch.LastEvent == nil {
			return nil
		}
		b, err := json.Marshal(&j.batch)
		if err != nil {
			return err
		}
		sh := jobShard[id]
		set.plJSON[sh] = append(set.plJSON[sh], gz(b))
		set.vmJSON[sh] = append(set.vmJSON[sh], gz(j.vmLines.Bytes()))
		j.batch = ship.Batch{JobID: id}
		j.vmLines.Reset()
		j.pending = 0
		return nil
	}
	err := eachChunk(streams, max(spec.batch/12, 50), func(s *workload.Stream, c *workload.Chunk, last bool) error {
		j := jobs[s.ID]
		if last {
			ls := []prompb.Label{{Name: "__name__", Value: tsdb.MetricLastEvent}, {Name: tsdb.LabelJob, Value: s.ID}}
			ts, vs := []int64{s.LastEventMs}, []float64{float64(s.LastCounter)}
			key := s.ID + "/last"
			rw[shardOf(key, spec.shards)].add(key, ls, ts, vs)
			j.batch.LastEvent = &ship.Event{Counter: s.LastCounter, TimeMs: s.LastEventMs}
			if err := addVM(j, ls, ts, vs); err != nil {
				return err
			}
			set.samples++
			return flushJSON(s.ID)
		}
		for ; j.nextTask <= c.Task; j.nextTask++ {
			t := s.Tasks[j.nextTask]
			ls := seriesLabels(tsdb.MetricTaskStart, s.ID, t)
			ts, vs := []int64{t.StartMs}, []float64{float64(t.Counter)}
			key := s.ID + "/task/" + t.UUID
			rw[shardOf(key, spec.shards)].add(key, ls, ts, vs)
			j.batch.Tasks = append(j.batch.Tasks, ship.Task{Counter: t.Counter, UUID: t.UUID, Name: t.Name, StartMs: t.StartMs})
			if err := addVM(j, ls, ts, vs); err != nil {
				return err
			}
			set.samples++
		}
		t := s.Tasks[c.Task]
		for r, res := range c.Resources {
			ls := seriesLabels(metricOf(res), s.ID, t)
			key := s.ID + "/" + res + "/" + t.UUID
			sh := &rw[shardOf(key, spec.shards)]
			sh.add(key, ls, c.Ts, c.Vs[r])
			if sh.pending >= spec.batch {
				if err := sh.flush(); err != nil {
					return err
				}
			}
			ts, vs := append([]int64(nil), c.Ts...), append([]float64(nil), c.Vs[r]...)
			j.batch.Series = append(j.batch.Series, ship.Series{Resource: res, Counter: t.Counter, UUID: t.UUID, Task: t.Name, Ts: ts, Vs: vs})
			if err := addVM(j, ls, ts, vs); err != nil {
				return err
			}
			j.pending += len(ts)
			set.samples += len(ts)
		}
		if j.pending >= spec.batch {
			return flushJSON(s.ID)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i := range rw {
		if err := rw[i].flush(); err != nil {
			return nil, err
		}
		set.rw = append(set.rw, rw[i].bodies)
	}
	return set, nil
}

// bodyBytes adds up the sizes of a set of bodies.
func bodyBytes(shards [][][]byte) (n int64) {
	for _, sh := range shards {
		for _, b := range sh {
			n += int64(len(b))
		}
	}
	return n
}
