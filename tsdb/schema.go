package tsdb

import (
	"fmt"
	"strconv"

	"github.com/prometheus/prometheus/model/labels"
)

// Metric and label names of the Peakline schema. Sample series carry
// job_id, counter, task_uuid and task; task series carry the same labels
// and one sample at the task's start; the job-end series carries job_id only.
const (
	MetricCPU       = "peakline_cpu_percent"
	MetricMemory    = "peakline_memory_bytes"
	MetricPIDs      = "peakline_pids"
	MetricTaskStart = "peakline_task_start"
	MetricLastEvent = "peakline_job_last_event"

	LabelJob      = "job_id"
	LabelCounter  = "counter"
	LabelTaskUUID = "task_uuid"
	LabelTask     = "task"
)

// Resource is one measured quantity of a job.
type Resource struct {
	Name   string // "cpu", "memory", "pids": the wire and payload name
	Metric string // the stored metric name
	Unit   string // "percent" (of one CPU), "bytes", "count"
}

// Resources lists every resource in payload order.
var Resources = []Resource{
	{Name: "cpu", Metric: MetricCPU, Unit: "percent"},
	{Name: "memory", Metric: MetricMemory, Unit: "bytes"},
	{Name: "pids", Metric: MetricPIDs, Unit: "count"},
}

// resourceIndex returns the position in Resources of a wire name, or -1.
func resourceIndex(name string) int {
	for i, r := range Resources {
		if r.Name == name {
			return i
		}
	}
	return -1
}

// metricIndex returns the position in Resources of a stored metric name, or -1.
func metricIndex(metric string) int {
	for i, r := range Resources {
		if r.Metric == metric {
			return i
		}
	}
	return -1
}

// Limits on what a batch may carry. They keep one job from bloating the
// index and one request from holding the store.
const (
	MaxJobIDLen    = 256
	MaxUUIDLen     = 128
	MaxTaskNameLen = 1024
)

// taskLabels builds the label set of a series of a task.
func taskLabels(b *labels.ScratchBuilder, metric, jobID string, counter int64, uuid, name string) labels.Labels {
	b.Reset()
	b.Add(labels.MetricName, metric)
	b.Add(LabelJob, jobID)
	b.Add(LabelCounter, strconv.FormatInt(counter, 10))
	b.Add(LabelTaskUUID, uuid)
	b.Add(LabelTask, name)
	b.Sort()
	return b.Labels()
}

// taskKey identifies a task of a job: the counter of its start event, and
// its uuid, which tells tasks apart when the counter is unknown (0).
type taskKey struct {
	counter int64
	uuid    string
}

// keyOf reads the task identity from a series' labels.
func keyOf(ls labels.Labels) (taskKey, error) {
	c, err := strconv.ParseInt(ls.Get(LabelCounter), 10, 64)
	if err != nil {
		return taskKey{}, fmt.Errorf("series %s has a bad %s label: %w", ls, LabelCounter, err)
	}
	return taskKey{counter: c, uuid: ls.Get(LabelTaskUUID)}, nil
}
