package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Job is a synthetic Ansible job: tasks in start order and, per resource,
// the samples of each task as parallel columns. Values are in the stored
// units (percent of one CPU, bytes, count).
type Job struct {
	ID          string
	Tasks       []Task
	Series      []JobSeries
	LastCounter int64 // counter of the job's last event
	LastEventMs int64 // its created time
}

// Task is a synthetic task start.
type Task struct {
	Counter int64
	UUID    string
	Name    string
	StartMs int64
	Kind    string // the shape its samples follow
}

// JobSeries holds the samples of one resource taken while Tasks[Task] ran.
type JobSeries struct {
	Resource string // "cpu", "memory" or "pids"
	Task     int
	Ts       []int64
	Vs       []float64
}

// JobSpec sizes a synthetic job.
type JobSpec struct {
	Tasks              int   // number of tasks (at least 1)
	SamplesPerResource int   // samples per resource over the whole job
	StartMs            int64 // time of the first task start
	IntervalMs         int64 // sampling interval (default 250)
	// Resources to generate; nil means cpu, memory and pids.
	Resources []string
}

// TaskKinds are the task shapes a synthetic job cycles through.
var TaskKinds = []string{"steady", "cpu-burst", "memory-staircase", "fork-burst", "idle", "short"}

// AnsibleJob generates a job deterministically from spec and seed. Each
// task starts a few event counters after the previous one (runner_on_start
// and runner_on_ok events in between), samples start 5–20 ms after the
// task start, and every sample falls before the next task's start.
func AnsibleJob(id string, spec JobSpec, seed int64) *Job {
	if spec.Tasks < 1 {
		spec.Tasks = 1
	}
	if spec.IntervalMs <= 0 {
		spec.IntervalMs = 250
	}
	if spec.Resources == nil {
		spec.Resources = []string{"cpu", "memory", "pids"}
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))
	job := &Job{ID: id}
	var perTask []int
	job.Tasks, perTask = planTasks(rng, spec)
	counter := int64(3)
	t := spec.StartMs
	for i := range job.Tasks {
		tk := &job.Tasks[i]
		tk.Counter = counter
		tk.UUID = fmt.Sprintf("%08x-0001-4000-8000-%012x", seed&0xffffffff, i)
		tk.Name = fmt.Sprintf("task %d (%s)", i, tk.Kind)
		tk.StartMs = t
		first := t + 5 + rng.Int64N(16)
		for _, res := range spec.Resources {
			s := JobSeries{Resource: res, Task: i}
			ts := first
			for k := 0; k < perTask[i]; k++ {
				s.Ts = append(s.Ts, ts)
				s.Vs = append(s.Vs, value(rng, res, tk.Kind, k, perTask[i]))
				ts += spec.IntervalMs - 3 + rng.Int64N(7)
			}
			if len(s.Ts) > 0 {
				job.Series = append(job.Series, s)
			}
		}
		t = first + int64(perTask[i])*(spec.IntervalMs+4) + 10 + rng.Int64N(50)
		counter += 3 + rng.Int64N(3) // runner_on_start, runner_on_ok, maybe loop items
	}
	job.LastCounter = counter
	job.LastEventMs = t
	return job
}

// planTasks draws the kind of each of spec.Tasks tasks and splits
// spec.SamplesPerResource among them: short tasks get few, others a random
// share. It returns the tasks (Kind set) and each one's samples per
// resource.
func planTasks(rng *rand.Rand, spec JobSpec) (tasks []Task, perTask []int) {
	weights := make([]float64, spec.Tasks)
	total := 0.0
	tasks = make([]Task, spec.Tasks)
	for i := range weights {
		kind := TaskKinds[rng.IntN(len(TaskKinds))]
		w := 0.2 + rng.Float64()*2
		if kind == "short" {
			w = 0.01
		}
		weights[i] = w
		total += w
		tasks[i].Kind = kind
	}
	perTask = make([]int, spec.Tasks)
	left := spec.SamplesPerResource
	for i := range perTask {
		n := int(math.Round(float64(spec.SamplesPerResource) * weights[i] / total))
		if i == len(perTask)-1 || n > left {
			n = left
		}
		perTask[i] = n
		left -= n
	}
	return tasks, perTask
}

// value is sample k of n of a task of the given kind.
func value(rng *rand.Rand, res, kind string, k, n int) float64 {
	frac := float64(k) / float64(max(n, 1))
	switch res {
	case "cpu":
		base := 2 + rng.Float64()*3
		switch kind {
		case "steady":
			base = 45 + rng.Float64()*10
		case "cpu-burst":
			if (k/8)%2 == 0 {
				base = 95 + rng.Float64()*110 // bursts over one CPU
			}
		case "fork-burst":
			base = 30 + rng.Float64()*60
		}
		return math.Round(base*1000) / 1000
	case "memory":
		mib := 40 + rng.Float64()*8
		switch kind {
		case "memory-staircase":
			if frac < 0.8 {
				mib += float64(int(frac*10)) * 60 // steps up, then release
			}
		case "steady":
			mib += 30
		}
		// Whole KiB, like cgroup accounting in pages.
		return math.Round(mib*1024) * 1024
	default: // pids
		p := 3 + float64(rng.IntN(3))
		if kind == "fork-burst" && frac > 0.2 && frac < 0.7 {
			p += 40 + float64(rng.IntN(60))
		}
		return p
	}
}
