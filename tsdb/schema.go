package tsdb

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
)

// Metric and label names of the Peakline schema. Sample series carry
// job_id, counter, task_uuid and task; task series carry the same labels
// and one sample at the task's start; the job-end series carries job_id only.
const (
	MetricCPU    = "peakline_cpu_percent"
	MetricMemory = "peakline_memory_bytes"
	MetricPIDs   = "peakline_pids"
	// Stall metrics: per CPU interval of the collector, the seconds the
	// job (or its node) was stalled during the interval that ends at the
	// sample, so a task's stall is the sum of its samples (see
	// Resource.Stall). MetricNodeLoad is the node's 1-minute load average
	// per CPU at the sample, sent where the kernel has no PSI.
	MetricCPUStall     = "peakline_cpu_stall_seconds"
	MetricMemoryStall  = "peakline_memory_stall_seconds"
	MetricCPUThrottled = "peakline_cpu_throttled_seconds"
	MetricNodeCPUStall = "peakline_node_cpu_stall_seconds"
	MetricNodeLoad     = "peakline_node_load_per_cpu"
	MetricTaskStart    = "peakline_task_start"
	MetricLastEvent    = "peakline_job_last_event"
	// MetricJobInfo is the job's template and AWX identity: one sample
	// (value: the store's clock in unix ms when written, so that of two
	// writes at one sample time the later wins) per update, its labels
	// holding the fields (see JobInfo).
	MetricJobInfo = "peakline_job_info"

	LabelJob      = "job_id"
	LabelCounter  = "counter"
	LabelTaskUUID = "task_uuid"
	LabelTask     = "task"

	// Labels of the task-start series that identify a task across runs
	// of a template (see package history): the play, the role ("" outside
	// one) and the task's file:line as the job events give it.
	LabelPlay     = "play"
	LabelRole     = "role"
	LabelTaskPath = "task_path"

	// Labels of MetricJobInfo.
	LabelTemplateID   = "template_id"
	LabelTemplateName = "template_name"
	LabelStatus       = "status"
	LabelPlaybook     = "playbook"
	LabelMeasured     = "measured"
	// Labels of MetricJobInfo that size the job (see JobInfo).
	LabelForks           = "forks"
	LabelHosts           = "hosts"
	LabelMemoryLimit     = "memory_limit_bytes"
	LabelOOMKills        = "oom_kills"
	LabelOOMCounter      = "oom_counter"
	LabelProjectRevision = "project_revision"
	LabelEEImage         = "ee_image"
)

// Values of JobInfo.Measured: how a job's samples were measured.
const (
	// MeasuredCgroup: from the job's own cgroup (collect, or the agent
	// when the job's container has a cgroup of its own).
	MeasuredCgroup = "cgroup"
	// MeasuredProcessTree: the job had no cgroup of its own; the samples
	// are sums over its process tree read from /proc. Memory is then the
	// summed RSS, which counts pages its processes share once per
	// process, and CPU misses processes that exited unreaped.
	MeasuredProcessTree = "process-tree"
)

// Resource is one measured quantity of a job.
type Resource struct {
	Name   string // "cpu", "memory", "pids", …: the wire and payload name
	Metric string // the stored metric name
	Unit   string // "percent" (of one CPU), "bytes", "count", "seconds", "ratio"
	// Stall marks what the job waited for rather than what it used
	// (cpu_stall, memory_stall, cpu_throttled, node_cpu_stall,
	// node_load): stored, read and attributed like the others, but no
	// series of the graph and no peak of the job list (which counts their
	// samples); the payloads carry them as each task's share of its wall
	// time spent stalled.
	Stall bool
}

// Resources lists every resource in payload order: the graphed ones
// first, then the stall resources.
var Resources = []Resource{
	{Name: "cpu", Metric: MetricCPU, Unit: "percent"},
	{Name: "memory", Metric: MetricMemory, Unit: "bytes"},
	{Name: "pids", Metric: MetricPIDs, Unit: "count"},
	{Name: "cpu_stall", Metric: MetricCPUStall, Unit: "seconds", Stall: true},
	{Name: "memory_stall", Metric: MetricMemoryStall, Unit: "seconds", Stall: true},
	{Name: "cpu_throttled", Metric: MetricCPUThrottled, Unit: "seconds", Stall: true},
	{Name: "node_cpu_stall", Metric: MetricNodeCPUStall, Unit: "seconds", Stall: true},
	{Name: "node_load", Metric: MetricNodeLoad, Unit: "ratio", Stall: true},
}

// GraphedResources returns the resources the graph draws (Stall false),
// in payload order, in a slice of its own.
func GraphedResources() []Resource {
	var out []Resource
	for _, r := range Resources {
		if !r.Stall {
			out = append(out, r)
		}
	}
	return out
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

// resourceNames lists the wire names of Resources, comma separated.
func resourceNames() string {
	names := make([]string, len(Resources))
	for i, r := range Resources {
		names[i] = r.Name
	}
	return strings.Join(names, ", ")
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

	MaxPlayLen         = 1024
	MaxRoleLen         = 256
	MaxTaskPathLen     = 1024
	MaxTemplateIDLen   = 128
	MaxTemplateNameLen = 512 // AWX's own limit of a template name
	MaxStatusLen       = 32
	MaxPlaybookLen     = 1024
	MaxMeasuredLen     = 32
	// MaxNumberLen bounds the decimal fields of JobInfo (forks, …): 20
	// digits hold any uint64.
	MaxNumberLen          = 20
	MaxProjectRevisionLen = 256
	MaxEEImageLen         = 1024
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

// taskStartLabels builds the label set of a task-start record: the task
// labels, and play, role and task_path when set (absent labels keep the
// series of older writers, which had none, the same).
func taskStartLabels(b *labels.ScratchBuilder, jobID string, t *Task) labels.Labels {
	b.Reset()
	b.Add(labels.MetricName, MetricTaskStart)
	b.Add(LabelJob, jobID)
	b.Add(LabelCounter, strconv.FormatInt(t.Counter, 10))
	b.Add(LabelTaskUUID, t.UUID)
	b.Add(LabelTask, t.Name)
	for _, l := range [...][2]string{{LabelPlay, t.Play}, {LabelRole, t.Role}, {LabelTaskPath, t.Path}} {
		if l[1] != "" {
			b.Add(l[0], l[1])
		}
	}
	b.Sort()
	return b.Labels()
}

// JobInfo is what a job is beyond its samples: the AWX job template it
// ran from and how it ended. Every field is optional ("" unknown).
type JobInfo struct {
	TemplateID   string // AWX job template id, e.g. "7"
	TemplateName string // e.g. "deploy-web"
	Status       string // AWX/ansible-runner status: "successful", "failed", "running", …
	Playbook     string // e.g. "site.yml"
	// Measured is how the samples were measured: MeasuredCgroup or
	// MeasuredProcessTree ("" not said; no other value is stored).
	Measured string
	// What sizes the job (package history's right-sizing reads them),
	// decimal numbers where named so: Forks is ansible's forks, Hosts the
	// hosts its play ran on, MemoryLimit the job cgroup's memory limit in
	// bytes (none: ""), OOMKills the OOM kills in the job's cgroup and
	// OOMCounter the counter of the task running at the last one.
	Forks, Hosts, MemoryLimit, OOMKills, OOMCounter string
	// ProjectRevision is the project's SCM revision, EEImage the
	// execution environment's image.
	ProjectRevision, EEImage string
}

// IsZero reports whether no field is set.
func (i JobInfo) IsZero() bool { return i == JobInfo{} }

// jobInfoLabels builds the label set of a job-info sample; empty fields
// are left out.
func jobInfoLabels(jobID string, info JobInfo) labels.Labels {
	b := labels.NewScratchBuilder(2 + numInfoFields)
	b.Add(labels.MetricName, MetricJobInfo)
	b.Add(LabelJob, jobID)
	for _, f := range infoFields(&info) {
		if *f.val != "" {
			b.Add(f.label, *f.val)
		}
	}
	b.Sort()
	return b.Labels()
}

// infoField is one field of JobInfo: its label (also its name in the
// ingest batch), its length limit, the values it may take besides ""
// (nil: any printable text), whether it is a decimal number and where
// it is held.
type infoField struct {
	label   string
	max     int
	allowed []string
	number  bool
	val     *string
}

// numInfoFields is the number of fields of JobInfo.
const numInfoFields = 12

// measuredValues are the values JobInfo.Measured may take besides "".
var measuredValues = []string{MeasuredCgroup, MeasuredProcessTree}

// infoFields lists the fields of info, in one place for writes and reads.
func infoFields(info *JobInfo) [numInfoFields]infoField {
	return [numInfoFields]infoField{
		{LabelTemplateID, MaxTemplateIDLen, nil, false, &info.TemplateID},
		{LabelTemplateName, MaxTemplateNameLen, nil, false, &info.TemplateName},
		{LabelStatus, MaxStatusLen, nil, false, &info.Status},
		{LabelPlaybook, MaxPlaybookLen, nil, false, &info.Playbook},
		{LabelMeasured, MaxMeasuredLen, measuredValues, false, &info.Measured},
		{LabelForks, MaxNumberLen, nil, true, &info.Forks},
		{LabelHosts, MaxNumberLen, nil, true, &info.Hosts},
		{LabelMemoryLimit, MaxNumberLen, nil, true, &info.MemoryLimit},
		{LabelOOMKills, MaxNumberLen, nil, true, &info.OOMKills},
		{LabelOOMCounter, MaxNumberLen, nil, true, &info.OOMCounter},
		{LabelProjectRevision, MaxProjectRevisionLen, nil, false, &info.ProjectRevision},
		{LabelEEImage, MaxEEImageLen, nil, false, &info.EEImage},
	}
}

// checkAllowed returns a description of what f may hold when v is
// neither "" nor one of its allowed values, else "".
func (f infoField) checkAllowed(v string) string {
	if f.number && v != "" {
		if _, err := strconv.ParseUint(v, 10, 64); err != nil {
			return fmt.Sprintf("must be a decimal number >= 0 or empty, got %q", v)
		}
		return ""
	}
	if v == "" || f.allowed == nil || slices.Contains(f.allowed, v) {
		return ""
	}
	return fmt.Sprintf("must be %s or empty, got %q", strings.Join(f.allowed, " or "), v)
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
