package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
)

// Job sizes of the benchmark matrix: samples per resource over a whole job
// and tasks per job. The largest jobs are only ever generated lazily by a
// Stream; 1e8 samples of three resources would take 4.8 GB as slices.
var (
	SampleSizes = []int{1e3, 1e4, 1e5, 1e6, 1e7, 1e8}
	TaskCounts  = []int{10, 100, 1000, 10_000, 50_000}
)

// JobName names a job workload of the matrix, e.g. "1e6x200": samples per
// resource, then tasks.
func JobName(samplesPerResource, tasks int) string {
	return SizeName(samplesPerResource) + "x" + strconv.Itoa(tasks)
}

// SizeName writes a count as 1eN when it is a power of ten, else in full.
func SizeName(n int) string {
	if n > 0 {
		e := math.Log10(float64(n))
		if e == math.Trunc(e) {
			return fmt.Sprintf("1e%d", int(e))
		}
	}
	return strconv.Itoa(n)
}

// ParseSize reads a count written as 1e6, 1000000 or 2.5e5.
func ParseSize(s string) (int, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 1 || f > 1e12 || f != math.Trunc(f) {
		return 0, fmt.Errorf("%q is not a whole count such as 1e6 or 1000", s)
	}
	return int(f), nil
}

// Stream generates a synthetic Ansible job lazily, in time order, one task
// and at most a chunk of samples at a time, so that a job of 1e8 samples
// per resource never has to be held in memory. It follows the same rules
// as AnsibleJob (task kinds, counters, samples between one task's start and
// the next's) but not its random sequence: the plan (tasks, their sample
// counts and times) is drawn when the stream is made, and each task's
// samples from generators of their own, so the data does not depend on the
// chunk size. Every resource of a task is sampled at the same times.
//
// A Stream is not safe for concurrent use; Clone gives an independent one.
type Stream struct {
	ID          string
	Tasks       []Task // the whole plan, in start order
	LastCounter int64  // counter of the job's last event
	LastEventMs int64  // its created time

	spec     JobSpec
	seed     int64
	perTask  []int   // samples per resource of each task
	firstMs  []int64 // first sample time of each task
	total    int
	task, k  int   // cursor: task and sample within it
	nextMs   int64 // time of the next sample of the current task
	tsRng    *rand.Rand
	valRngs  []*rand.Rand
	produced int
}

// Chunk is a run of samples of one task: every resource of the stream
// (Resources order) sampled at the times Ts. Next reuses its slices.
type Chunk struct {
	Task      int      // index into Stream.Tasks
	Resources []string // "cpu", "memory", "pids"
	Ts        []int64  // unix ms, strictly increasing
	Vs        [][]float64
}

// Samples is the number of samples in c, over all resources.
func (c *Chunk) Samples() int { return len(c.Ts) * len(c.Resources) }

// NewStream plans a job of spec deterministically from seed.
func NewStream(id string, spec JobSpec, seed int64) *Stream {
	if spec.Tasks < 1 {
		spec.Tasks = 1
	}
	if spec.IntervalMs <= 0 {
		spec.IntervalMs = Interval
	}
	if spec.Resources == nil {
		spec.Resources = []string{"cpu", "memory", "pids"}
	}
	s := &Stream{ID: id, spec: spec, seed: seed, total: spec.SamplesPerResource}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5851f42d4c957f2d))
	s.Tasks, s.perTask = planTasks(rng, spec)
	s.firstMs = make([]int64, spec.Tasks)
	counter, t := int64(3), spec.StartMs
	for i := range s.Tasks {
		tk := &s.Tasks[i]
		tk.Counter = counter
		tk.UUID = fmt.Sprintf("%08x-0002-4000-8000-%012x", seed&0xffffffff, i)
		tk.Name = fmt.Sprintf("task %d (%s)", i, tk.Kind)
		tk.StartMs = t
		s.firstMs[i] = t + 5 + rng.Int64N(16)
		// Sample steps are interval±3 ms, so the last sample of a task
		// falls before the next task's start.
		t = s.firstMs[i] + int64(s.perTask[i])*(spec.IntervalMs+4) + 10 + rng.Int64N(50)
		counter += 3 + rng.Int64N(3)
	}
	s.LastCounter, s.LastEventMs = counter, t
	s.Reset()
	return s
}

// Spec is the spec the stream was made with, defaults filled in.
func (s *Stream) Spec() JobSpec { return s.spec }

// SamplesPerResource is the number of samples of each resource in the job.
func (s *Stream) SamplesPerResource() int { return s.total }

// TaskSamples is the number of samples per resource of task i.
func (s *Stream) TaskSamples(i int) int { return s.perTask[i] }

// Produced is the number of samples per resource Next has returned since
// the last Reset.
func (s *Stream) Produced() int { return s.produced }

// Clone returns a stream of the same job, rewound.
func (s *Stream) Clone() *Stream {
	c := *s
	c.valRngs = nil
	c.Reset()
	return &c
}

// Reset rewinds the stream to the first sample.
func (s *Stream) Reset() {
	s.task, s.k, s.produced = 0, 0, 0
	s.startTask()
}

func (s *Stream) startTask() {
	s.k = 0
	if s.task >= len(s.Tasks) {
		return
	}
	s.nextMs = s.firstMs[s.task]
	s.tsRng = rand.New(rand.NewPCG(uint64(s.seed), uint64(s.task)<<3|7))
	s.valRngs = s.valRngs[:0]
	for r := range s.spec.Resources {
		s.valRngs = append(s.valRngs, rand.New(rand.NewPCG(uint64(s.seed), uint64(s.task)<<3|uint64(r))))
	}
}

// Next fills c with the next samples of the job, at most maxPerResource
// per resource (no limit when <= 0) and never more than one task's, and
// reports whether there were any. Tasks without samples are skipped.
func (s *Stream) Next(c *Chunk, maxPerResource int) bool {
	return s.NextUntil(c, maxPerResource, math.MaxInt64)
}

// NextUntil is Next limited to samples taken at or before untilMs: a
// live job that has only run so far. It returns false when no such
// sample is left (the job may still have later ones).
func (s *Stream) NextUntil(c *Chunk, maxPerResource int, untilMs int64) bool {
	for s.task < len(s.Tasks) && s.k >= s.perTask[s.task] {
		s.task++
		s.startTask()
	}
	if s.task >= len(s.Tasks) || s.nextMs > untilMs {
		return false
	}
	n := s.perTask[s.task] - s.k
	if maxPerResource > 0 {
		n = min(n, maxPerResource)
	}
	c.Task = s.task
	c.Resources = s.spec.Resources
	c.Ts = c.Ts[:0]
	if len(c.Vs) != len(s.spec.Resources) {
		c.Vs = make([][]float64, len(s.spec.Resources))
	}
	for r := range c.Vs {
		c.Vs[r] = c.Vs[r][:0]
	}
	kind, total := s.Tasks[s.task].Kind, s.perTask[s.task]
	for range n {
		if s.nextMs > untilMs {
			break
		}
		c.Ts = append(c.Ts, s.nextMs)
		for r, res := range s.spec.Resources {
			c.Vs[r] = append(c.Vs[r], value(s.valRngs[r], res, kind, s.k, total))
		}
		s.k++
		s.nextMs += s.spec.IntervalMs - 3 + s.tsRng.Int64N(7)
	}
	s.produced += len(c.Ts)
	return true
}

// Job materialises the whole stream (rewinding it) as a Job: one series
// per task and resource. Use it for jobs that fit in memory.
func (s *Stream) Job() *Job {
	s.Reset()
	defer s.Reset()
	j := &Job{ID: s.ID, Tasks: s.Tasks, LastCounter: s.LastCounter, LastEventMs: s.LastEventMs}
	var c Chunk
	for s.Next(&c, 0) {
		for r, res := range c.Resources {
			j.Series = append(j.Series, JobSeries{Resource: res, Task: c.Task,
				Ts: append([]int64(nil), c.Ts...), Vs: append([]float64(nil), c.Vs[r]...)})
		}
	}
	return j
}
