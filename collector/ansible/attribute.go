package ansible

import (
	"cmp"
	"slices"
	"sort"
)

// buildJob makes a Job of parsed events and samples, attributing every
// sample to a task (see Read for the rule). It sorts samples in place.
//
// Times are compared at millisecond resolution, the resolution the store
// keeps, so that a sample attributed by time lies inside its task's
// [StartMs, EndMs] as the server will see it.
func buildJob(id, layout string, events []JobEvent, samples []sample) *Job {
	job := &Job{ID: id, Source: layout, LastEvent: lastEvent(events)}
	// Stable, so samples in one millisecond keep the files' order.
	slices.SortStableFunc(samples, func(a, b sample) int { return cmp.Compare(a.ms, b.ms) })

	var taskOf []int // per sample: index into job.Tasks, or -1 (unknown)
	if starts := sortTaskStarts(events); len(starts) > 0 {
		job.Tasks, taskOf = attributeByEvents(starts, samples)
	} else {
		job.Tasks, taskOf = attributeByUUID(samples)
	}
	setTaskEnds(job, samples, taskOf)
	job.Series = groupSeries(job.Tasks, samples, taskOf)
	return job
}

// attributeByEvents makes one task per task start event and gives each
// sample to the last task started at or before it. A sample older than the
// first start goes to the first start of its own task uuid, else to no task.
func attributeByEvents(starts []JobEvent, samples []sample) ([]Task, []int) {
	tasks := make([]Task, len(starts))
	firstByUUID := make(map[string]int, len(starts))
	for i, ev := range starts {
		tasks[i] = Task{Counter: ev.Counter, UUID: ev.TaskUUID, Name: ev.Task, StartMs: ev.TimeMs, Play: ev.Play, Role: ev.Role, Path: ev.TaskPath}
		if _, ok := firstByUUID[ev.TaskUUID]; !ok {
			firstByUUID[ev.TaskUUID] = i
		}
	}
	taskOf := make([]int, len(samples))
	for j, s := range samples {
		// The first start after s, minus one: ties count as started.
		i := sort.Search(len(starts), func(i int) bool { return starts[i].TimeMs > s.ms }) - 1
		if i < 0 {
			var ok bool
			if i, ok = firstByUUID[s.uuid]; !ok {
				i = -1
			}
		}
		taskOf[j] = i
	}
	return tasks, taskOf
}

// attributeByUUID makes one task per distinct sample task uuid, counter 0
// (unknown), named after its first sample and started at it; each sample
// belongs to its own uuid's task. Tasks are ordered by start, then uuid.
func attributeByUUID(samples []sample) ([]Task, []int) {
	index := make(map[string]int)
	var tasks []Task
	for _, s := range samples { // in time order: the first seen is the first
		if _, ok := index[s.uuid]; !ok {
			index[s.uuid] = len(tasks)
			tasks = append(tasks, Task{UUID: s.uuid, Name: s.name, StartMs: s.ms})
		}
	}
	slices.SortStableFunc(tasks, func(a, b Task) int {
		if c := cmp.Compare(a.StartMs, b.StartMs); c != 0 {
			return c
		}
		return cmp.Compare(a.UUID, b.UUID)
	})
	for i, t := range tasks {
		index[t.UUID] = i
	}
	taskOf := make([]int, len(samples))
	for j, s := range samples {
		taskOf[j] = index[s.uuid]
	}
	return tasks, taskOf
}

// setTaskEnds ends each task where the next one starts, and the last at the
// newest job event or its own last sample, whichever is later.
func setTaskEnds(job *Job, samples []sample, taskOf []int) {
	n := len(job.Tasks)
	if n == 0 {
		return
	}
	for i := range n - 1 {
		job.Tasks[i].EndMs = job.Tasks[i+1].StartMs
	}
	last := &job.Tasks[n-1]
	last.EndMs = last.StartMs
	if job.LastEvent != nil {
		last.EndMs = max(last.EndMs, job.LastEvent.TimeMs)
	}
	for j, s := range samples {
		if taskOf[j] == n-1 {
			last.EndMs = max(last.EndMs, s.ms)
		}
	}
}

// seriesKey identifies a series: a resource and a task, or for samples of
// no known task, the uuid and name the plugin gave them.
type seriesKey struct {
	resource   uint8
	task       int
	uuid, name string
}

// groupSeries gathers time-ordered samples into one series per resource and
// task. Two samples of a series in one millisecond (the plugin polls every
// 250 ms; only a handover between its threads comes close) keep the larger
// value, so the high-water mark survives.
func groupSeries(tasks []Task, samples []sample, taskOf []int) []Series {
	index := make(map[seriesKey]int)
	var out []Series
	for j, s := range samples {
		key := seriesKey{resource: s.resource, task: taskOf[j]}
		if key.task < 0 {
			key.uuid, key.name = s.uuid, s.name
		}
		k, ok := index[key]
		if !ok {
			k = len(out)
			index[key] = k
			ser := Series{Resource: resources[s.resource], UUID: s.uuid, Task: s.name}
			if key.task >= 0 {
				t := tasks[key.task]
				ser.Counter, ser.UUID, ser.Task = t.Counter, t.UUID, t.Name
			}
			out = append(out, ser)
		}
		ser := &out[k]
		if n := len(ser.Ts); n > 0 && ser.Ts[n-1] == s.ms {
			ser.Vs[n-1] = max(ser.Vs[n-1], s.value)
			continue
		}
		ser.Ts = append(ser.Ts, s.ms)
		ser.Vs = append(ser.Vs, s.value)
	}
	slices.SortFunc(out, func(a, b Series) int {
		return cmp.Or(
			cmp.Compare(resourceIndex(a.Resource), resourceIndex(b.Resource)),
			cmp.Compare(a.Ts[0], b.Ts[0]),
			cmp.Compare(a.Counter, b.Counter),
			cmp.Compare(a.UUID, b.UUID),
			cmp.Compare(a.Task, b.Task),
		)
	})
	return out
}

func resourceIndex(name string) int {
	for i, r := range resources {
		if r == name {
			return i
		}
	}
	return len(resources)
}
