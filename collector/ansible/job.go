package ansible

import "errors"

// Resources, in the order a Job's series are sorted. Values are in the
// stored unit: percent of one CPU (may exceed 100), bytes, process count.
const (
	ResourceCPU    = "cpu"
	ResourceMemory = "memory"
	ResourcePids   = "pids"
)

// Stall resources: what the job and its node waited for, sampled with
// CPU (the same intervals, the same task boundaries). Each value is the
// seconds stalled during the interval that ends at the sample, so a
// task's stall is the sum of its samples; node_load is the node's
// 1-minute load average per CPU at the sample, sent where the kernel has
// no /proc/pressure.
const (
	ResourceCPUStall     = "cpu_stall"      // the job's tasks waited for a CPU
	ResourceMemoryStall  = "memory_stall"   // the job's tasks waited on memory
	ResourceCPUThrottled = "cpu_throttled"  // the job's CPU limit held it back
	ResourceNodeCPUStall = "node_cpu_stall" // some task on the node waited for a CPU
	ResourceNodeLoad     = "node_load"      // load average per CPU (no PSI)
)

// resources lists the resource names by their sort index.
var resources = [...]string{ResourceCPU, ResourceMemory, ResourcePids}

// Layouts, as reported in Job.Source.
const (
	// LayoutRunner is an ansible-runner private data dir:
	// artifacts/<ident>/job_events/*.json and profiling_data/.
	LayoutRunner = "runner"
	// LayoutRecap is a cgroup_perf_recap output dir written by plain
	// ansible-playbook (often named ansible-perf-<timestamp>).
	LayoutRecap = "recap"
	// LayoutAWX is Tower/AWX 8–17's playbook_profiling/<job_id>/ dir.
	LayoutAWX = "awx"
)

var (
	// ErrNoLayout means a path is not one of the layouts Read understands.
	ErrNoLayout = errors.New("matches no known layout")
	// ErrBadValue means a sample's timestamp or value is not finite, is
	// negative or is out of range.
	ErrBadValue = errors.New("bad sample value")
	// ErrTruncated means a JSON-seq record ends before its JSON text does,
	// as when the writer was killed mid-record.
	ErrTruncated = errors.New("truncated record")
	// ErrBadEvent means a job event file is not a job event.
	ErrBadEvent = errors.New("bad job event")
	// ErrSeveralJobs means ReadOptions.JobID was set for a path holding
	// more than one job.
	ErrSeveralJobs = errors.New("path holds several jobs")
	// ErrUnclaimedFile means a profiling file shared by several runner
	// idents names a task that no ident's job events name.
	ErrUnclaimedFile = errors.New("profiling file belongs to no job")
)

// Job is one Ansible job read from disk: its tasks, its newest job event and
// its samples, grouped per resource and attributed task.
type Job struct {
	// ID is the job id: the runner ident, the recap dir name, the AWX job
	// id, or ReadOptions.JobID.
	ID string
	// Source is the layout the job was read from (LayoutRunner, …).
	Source string
	// Tasks are ordered by StartMs, then Counter.
	Tasks []Task
	// LastEvent is the job event with the highest counter; nil when the
	// job has no job events.
	LastEvent *Event
	// Series holds one entry per (resource, attributed task), ordered by
	// resource (cpu, memory, pids), then first timestamp, Counter, UUID.
	Series []Series
	// Info is the job's template and AWX identity, from the runner's
	// env/extravars, artifacts/<ident>/status and job events, or
	// ReadOptions.
	Info JobInfo
}

// JobInfo is the job's AWX job template and how the job ended. Every
// field is optional. (The ingest batch's wire form is collector/ship's.)
type JobInfo struct {
	TemplateID   string
	TemplateName string
	// Status is ansible-runner's or AWX's: successful, failed, canceled,
	// timeout, running, error.
	Status   string
	Playbook string
	// Measured is how the samples were measured: MeasuredCgroup,
	// MeasuredProcessTree or "" (not said).
	Measured string
	// What sizes the job (0 or "" unknown): ansible's forks, the hosts
	// its play ran on, its cgroup's memory limit in bytes, the OOM kills
	// in that cgroup and the counter of the task running at the last one
	// (0 unknown), the project's SCM revision and the execution
	// environment's image.
	Forks, Hosts     int
	MemoryLimitBytes int64
	OOMKills         int
	OOMCounter       int64
	ProjectRevision  string
	EEImage          string
}

// Values of JobInfo.Measured (the server refuses any other).
const (
	MeasuredCgroup      = "cgroup"       // the job's own cgroup
	MeasuredProcessTree = "process-tree" // sums over the job's processes from /proc: it had no cgroup of its own
)

// Task is one start of an Ansible task (handlers and cleanup tasks too).
//
// With job events, Counter is the counter of its playbook_on_task_start
// event; a task that starts several times (include_tasks in a loop) is
// several Tasks with distinct counters. Without job events Counter is 0
// (unknown) and tasks are told apart by UUID.
type Task struct {
	Counter int64
	UUID    string
	Name    string
	// StartMs is the task start in unix milliseconds.
	StartMs int64
	// Play, Role and Path (event_data.task_path, file:line) identify the
	// task across runs of a template; "" when the events lack them.
	Play string
	Role string
	Path string
	// EndMs is the next task's start, or for the last task the newest job
	// event's time or its last sample, whichever is later. It is derived,
	// so it is not sent: the server derives it the same way.
	EndMs int64
}

// Event is a job event reduced to what the store keeps: its counter and its
// created time in unix milliseconds.
type Event struct {
	Counter int64
	TimeMs  int64
}

// Series is the samples of one resource attributed to one task. Ts holds
// unix milliseconds, strictly increasing; Vs the values in the stored unit;
// len(Ts) == len(Vs).
type Series struct {
	Resource string
	// Counter, UUID and Task identify the task the samples belong to;
	// Counter is 0 when unknown.
	Counter int64
	UUID    string
	Task    string
	Ts      []int64
	Vs      []float64
}

// Samples returns the number of samples in all of j's series.
func (j *Job) Samples() int {
	n := 0
	for i := range j.Series {
		n += len(j.Series[i].Ts)
	}
	return n
}
