package ship

import "github.com/peakline/peakline/collector/ansible"

// The ingest batch's wire format (docs/CONTRACTS.md) is these types' JSON
// tags and nothing else: the readers in collector/ansible and
// collector/live have types of their own, converted here, and the server
// decodes with types of its own. testdata/batch.golden.json pins the
// encoding; server/testdata/batch.golden.json holds the same bytes and
// pins the decoding. A new field goes into one type here, its conversion
// below, the golden file (both copies) and the server's decode type.

// Batch is one JSON ingest batch (POST /api/v1/ingest). Tasks, LastEvent
// and Series may each be empty; JobID may not.
type Batch struct {
	JobID     string   `json:"job_id"`
	Tasks     []Task   `json:"tasks,omitempty"`
	LastEvent *Event   `json:"last_event,omitempty"`
	Series    []Series `json:"series,omitempty"`
	JobInfo
}

// JobInfo is the job's AWX job template and how the job ended. Every
// field is optional.
type JobInfo struct {
	TemplateID   string `json:"template_id,omitempty"`
	TemplateName string `json:"template_name,omitempty"`
	// Status: successful, failed, canceled, timeout, running, error.
	Status   string `json:"status,omitempty"`
	Playbook string `json:"playbook,omitempty"`
	// Measured: ansible.MeasuredCgroup, ansible.MeasuredProcessTree or "".
	Measured string `json:"measured,omitempty"`
	// What sizes the job (right-sizing): ansible's forks, the hosts its
	// play ran on, its cgroup's memory limit in bytes, the OOM kills in
	// that cgroup and the counter of the task running at the last one,
	// the project's SCM revision and the execution environment's image.
	Forks            int    `json:"forks,omitempty"`
	Hosts            int    `json:"hosts,omitempty"`
	MemoryLimitBytes int64  `json:"memory_limit_bytes,omitempty"`
	OOMKills         int    `json:"oom_kills,omitempty"`
	OOMCounter       int64  `json:"oom_counter,omitempty"`
	ProjectRevision  string `json:"project_revision,omitempty"`
	EEImage          string `json:"ee_image,omitempty"`
}

// Task is one start of an Ansible task; Counter is 0 when unknown.
type Task struct {
	Counter int64  `json:"counter"`
	UUID    string `json:"uuid"`
	Name    string `json:"name"`
	// StartMs is the task start in unix milliseconds.
	StartMs int64  `json:"start"`
	Play    string `json:"play,omitempty"`
	Role    string `json:"role,omitempty"`
	Path    string `json:"task_path,omitempty"`
}

// Event is the job's newest job event: its counter and created time in
// unix milliseconds.
type Event struct {
	Counter int64 `json:"counter"`
	TimeMs  int64 `json:"time"`
}

// Series is the samples of one resource attributed to one task: Ts in
// unix milliseconds, strictly increasing; Vs in the stored unit.
type Series struct {
	Resource string    `json:"resource"`
	Counter  int64     `json:"counter"`
	UUID     string    `json:"uuid"`
	Task     string    `json:"task"`
	Ts       []int64   `json:"t"`
	Vs       []float64 `json:"v"`
}

// InfoOf converts a job's info to its wire form.
func InfoOf(i ansible.JobInfo) JobInfo {
	return JobInfo{
		TemplateID:   i.TemplateID,
		TemplateName: i.TemplateName,
		Status:       i.Status,
		Playbook:     i.Playbook,
		Measured:     i.Measured,

		Forks: i.Forks, Hosts: i.Hosts, MemoryLimitBytes: i.MemoryLimitBytes,
		OOMKills: i.OOMKills, OOMCounter: i.OOMCounter,
		ProjectRevision: i.ProjectRevision, EEImage: i.EEImage,
	}
}

// TaskOf converts a task to its wire form (EndMs is derived, not sent).
func TaskOf(t ansible.Task) Task {
	return Task{Counter: t.Counter, UUID: t.UUID, Name: t.Name, StartMs: t.StartMs, Play: t.Play, Role: t.Role, Path: t.Path}
}

// TasksOf converts tasks to their wire form; nil for none.
func TasksOf(ts []ansible.Task) []Task {
	if len(ts) == 0 {
		return nil
	}
	out := make([]Task, len(ts))
	for i, t := range ts {
		out[i] = TaskOf(t)
	}
	return out
}

// EventOf converts a job event to its wire form; nil for nil.
func EventOf(e *ansible.Event) *Event {
	if e == nil {
		return nil
	}
	return &Event{Counter: e.Counter, TimeMs: e.TimeMs}
}

// SeriesOf converts a series to its wire form, sharing its samples.
func SeriesOf(s ansible.Series) Series {
	return Series{Resource: s.Resource, Counter: s.Counter, UUID: s.UUID, Task: s.Task, Ts: s.Ts, Vs: s.Vs}
}

// SeriesListOf converts series to their wire form, sharing their
// samples; nil for none.
func SeriesListOf(ss []ansible.Series) []Series {
	if len(ss) == 0 {
		return nil
	}
	out := make([]Series, len(ss))
	for i, s := range ss {
		out[i] = SeriesOf(s)
	}
	return out
}

// AddTo adds b to j, undoing Batches: its tasks and series are appended
// (sharing b's samples), its last event replaces j's when newer, and its
// info replaces j's when it has any. It reads batch files back into a job.
func (b *Batch) AddTo(j *ansible.Job) {
	for _, t := range b.Tasks {
		j.Tasks = append(j.Tasks, ansible.Task{Counter: t.Counter, UUID: t.UUID, Name: t.Name, StartMs: t.StartMs, Play: t.Play, Role: t.Role, Path: t.Path})
	}
	for _, s := range b.Series {
		j.Series = append(j.Series, ansible.Series{Resource: s.Resource, Counter: s.Counter, UUID: s.UUID, Task: s.Task, Ts: s.Ts, Vs: s.Vs})
	}
	if e := b.LastEvent; e != nil && (j.LastEvent == nil || e.Counter > j.LastEvent.Counter) {
		j.LastEvent = &ansible.Event{Counter: e.Counter, TimeMs: e.TimeMs}
	}
	if i := b.JobInfo; i != (JobInfo{}) {
		j.Info = ansible.JobInfo{TemplateID: i.TemplateID, TemplateName: i.TemplateName, Status: i.Status, Playbook: i.Playbook, Measured: i.Measured,
			Forks: i.Forks, Hosts: i.Hosts, MemoryLimitBytes: i.MemoryLimitBytes, OOMKills: i.OOMKills, OOMCounter: i.OOMCounter,
			ProjectRevision: i.ProjectRevision, EEImage: i.EEImage}
	}
}
