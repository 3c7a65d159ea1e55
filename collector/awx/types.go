package awx

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/peakline/peakline/collector/ansible"
)

var (
	// ErrJobNotFound means AWX answered 404 for the job: no such job, or
	// the token's user may not see it.
	ErrJobNotFound = errors.New("job not found")
	// ErrTooLarge means an answer was over Config.MaxPageBytes or held
	// more than Config.MaxPageEvents events.
	ErrTooLarge = errors.New("AWX answer too large")
	// ErrForeignLink means a next link or a redirect led away from the AWX
	// host of --awx-url; it is not followed and the token is not sent.
	ErrForeignLink = errors.New("link to another host")
)

// AuthError is a 401 or 403 answer: AWX refused the token. Sending again
// with the same token cannot help.
type AuthError struct {
	StatusCode int
	// Message is AWX's detail, if any.
	Message string
	// TokenFile is the --awx-token-file the token came from.
	TokenFile string
}

func (e *AuthError) Error() string {
	s := fmt.Sprintf("AWX refused the token from --awx-token-file %s: %d %s", e.TokenFile, e.StatusCode, http.StatusText(e.StatusCode))
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.StatusCode == http.StatusForbidden {
		s += " (the token's user needs read access to the job)"
	}
	return s
}

// RetryableError is an answer or failure that a later request may not
// meet: 429, a 5xx, or a network error (StatusCode 0). RetryAfter is the
// server's Retry-After, 0 when it gave none.
type RetryableError struct {
	StatusCode int
	RetryAfter time.Duration
	Err        error
}

func (e *RetryableError) Error() string { return e.Err.Error() }
func (e *RetryableError) Unwrap() error { return e.Err }

// Final statuses of an AWX job: it runs no more.
const (
	StatusSuccessful = "successful"
	StatusFailed     = "failed"
	StatusError      = "error"
	StatusCanceled   = "canceled"
)

// Types of AWX unified jobs: the type field of /api/v2/unified_jobs/.
// Every one of them shares one sequence of ids, and every type but the
// workflow job runs ansible-runner, as ansible_runner_<id> on an
// execution node or as the pod automation-job-<id>.
const (
	TypeJob             = "job"
	TypeAdHocCommand    = "ad_hoc_command"
	TypeProjectUpdate   = "project_update"
	TypeInventoryUpdate = "inventory_update"
	TypeSystemJob       = "system_job"
	TypeWorkflowJob     = "workflow_job"
)

// RunnerTypes are the unified job types that run ansible-runner, and so
// can be found on a node, in AWX's order.
var RunnerTypes = []string{TypeJob, TypeAdHocCommand, TypeProjectUpdate, TypeInventoryUpdate, TypeSystemJob}

// EventsPath is the API path of the events of a unified job of type typ
// (awx/api/urls: jobs/{id}/job_events/, the other types' {id}/events/);
// false for a type with no events of its own (workflow_job) or unknown.
func EventsPath(typ string, id int64) (string, bool) {
	switch typ {
	case TypeJob:
		return fmt.Sprintf("/api/v2/jobs/%d/job_events/", id), true
	case TypeAdHocCommand, TypeProjectUpdate, TypeInventoryUpdate, TypeSystemJob:
		return fmt.Sprintf("/api/v2/%ss/%d/events/", typ, id), true
	}
	return "", false
}

// Job is an AWX job's metadata, from GET /api/v2/jobs/{id}/, or a unified
// job's of any type, from /api/v2/unified_jobs/?id={id} and its URL.
type Job struct {
	ID int64
	// Type is the unified job's type (TypeJob, TypeAdHocCommand, …);
	// URL its API path, such as /api/v2/ad_hoc_commands/12/.
	Type, URL string
	Name      string
	Status    string
	// TemplateID is the job_template field, 0 when null (the template was
	// deleted) and for the types that have no job template (an ad hoc
	// command's, a project update's); TemplateName is
	// summary_fields.job_template.name.
	TemplateID    int64
	TemplateName  string
	Playbook      string
	ExecutionNode string
	// Started and Finished are zero while unknown.
	Started, Finished time.Time
	// EventProcessingFinished tells that every event of a finished job is
	// saved; AWX versions without the field leave it false.
	EventProcessingFinished bool
	// Forks is the job's forks (0: ansible's default); ProjectRevision
	// its scm_revision; EEImage summary_fields.execution_environment.image.
	Forks           int
	ProjectRevision string
	EEImage         string
}

// Final tells whether the job runs no more.
func (j Job) Final() bool {
	switch j.Status {
	case StatusSuccessful, StatusFailed, StatusError, StatusCanceled:
		return true
	}
	return false
}

// Info returns the job's info as Peakline stores it: the template id and
// name, the status and the playbook ("" for what AWX did not say).
func (j Job) Info() ansible.JobInfo {
	info := ansible.JobInfo{TemplateName: j.TemplateName, Status: j.Status, Playbook: j.Playbook,
		Forks: j.Forks, ProjectRevision: j.ProjectRevision, EEImage: j.EEImage}
	if info.Forks <= 0 && (j.Type == "" || j.Type == TypeJob || j.Type == TypeAdHocCommand) {
		// AWX's forks 0 passes no --forks: ansible runs its default.
		info.Forks = ansible.DefaultForks
	}
	if j.TemplateID != 0 {
		info.TemplateID = JobID(j.TemplateID)
	}
	return info
}

// Event is an AWX job event reduced to what attribution needs.
type Event struct {
	Counter int64
	// Created is when the event happened, UTC, to the microsecond.
	Created time.Time
	// Event is the event's type, such as playbook_on_task_start.
	Event    string
	UUID     string
	TaskUUID string // event_data.task_uuid; the event's uuid for a task start without one
	Task     string
	Play     string
	Role     string
	Playbook string
	TaskPath string // event_data.task_path, file:line
	HostName string
	// Hosts is the hosts a playbook_on_stats event's
	// event_data.processed names; 0 on other events.
	Hosts int
	// Killed marks a failed task result killed by SIGKILL (see
	// ansible.JobEvent.Killed).
	Killed bool
}

// TaskStart tells whether the event starts a task: a task, handler or
// cleanup task (AWX stores handlers as playbook_on_task_start; other
// emitters name them playbook_on_handler_task_start or
// playbook_on_cleanup_task_start).
func (e Event) TaskStart() bool {
	switch e.Event {
	case "playbook_on_task_start", "playbook_on_handler_task_start", "playbook_on_cleanup_task_start":
		return true
	}
	return false
}

// JobEvent returns the event as the collector's attribution takes it:
// created rounded to the millisecond, as ansible.ParseCreated does.
func (e Event) JobEvent() ansible.JobEvent {
	return ansible.JobEvent{
		Counter: e.Counter, TimeMs: e.Created.Round(time.Millisecond).UnixMilli(), TaskStart: e.TaskStart(),
		UUID: e.UUID, TaskUUID: e.TaskUUID, Task: e.Task, Play: e.Play, Role: e.Role, TaskPath: e.TaskPath, Playbook: e.Playbook,
		Hosts: e.Hosts, Killed: e.Killed,
	}
}

// EventStats is the event type that ends a playbook run.
const EventStats = "playbook_on_stats"

// Page is one page of a job's events.
type Page struct {
	// Count is the number of events the query matches, all pages.
	Count int
	// Next and Previous are AWX's links, relative to the host; "" when
	// there is no such page.
	Next, Previous string
	// Events are in counter order.
	Events []Event
}

// rawJob is the part of AWX's job JSON the client reads.
type rawJob struct {
	ID                      int64      `json:"id"`
	Type                    string     `json:"type"`
	URL                     string     `json:"url"`
	Name                    string     `json:"name"`
	Status                  string     `json:"status"`
	JobTemplate             *int64     `json:"job_template"`
	Playbook                string     `json:"playbook"`
	ExecutionNode           string     `json:"execution_node"`
	Started                 *time.Time `json:"started"`
	Finished                *time.Time `json:"finished"`
	EventProcessingFinished bool       `json:"event_processing_finished"`
	Forks                   int        `json:"forks"`
	SCMRevision             string     `json:"scm_revision"`
	SummaryFields           struct {
		JobTemplate *struct {
			ID   int64  `json:"id"`
			Name string `json:"name"`
		} `json:"job_template"`
		ExecutionEnvironment *struct {
			Image string `json:"image"`
		} `json:"execution_environment"`
	} `json:"summary_fields"`
}

func (r *rawJob) job() Job {
	j := Job{ID: r.ID, Type: r.Type, URL: r.URL, Name: r.Name, Status: r.Status, Playbook: r.Playbook, ExecutionNode: r.ExecutionNode, EventProcessingFinished: r.EventProcessingFinished,
		Forks: r.Forks, ProjectRevision: r.SCMRevision}
	if e := r.SummaryFields.ExecutionEnvironment; e != nil {
		j.EEImage = e.Image
	}
	if r.JobTemplate != nil {
		j.TemplateID = *r.JobTemplate
	}
	if t := r.SummaryFields.JobTemplate; t != nil {
		j.TemplateName = t.Name
		if j.TemplateID == 0 {
			j.TemplateID = t.ID
		}
	}
	if r.Started != nil {
		j.Started = r.Started.UTC()
	}
	if r.Finished != nil {
		j.Finished = r.Finished.UTC()
	}
	return j
}

// rawUnified is AWX's list of unified jobs: each item in the shape of
// its own type's list serializer, event_processing_finished left out
// (UnifiedJobListSerializer).
type rawUnified struct {
	Count   int      `json:"count"`
	Results []rawJob `json:"results"`
}

// rawPage is AWX's list envelope.
type rawPage struct {
	Count    int        `json:"count"`
	Next     string     `json:"next"`
	Previous string     `json:"previous"`
	Results  []rawEvent `json:"results"`
}

type rawEvent struct {
	Counter   *int64 `json:"counter"`
	Created   string `json:"created"`
	Event     string `json:"event"`
	UUID      string `json:"uuid"`
	Task      string `json:"task"`
	Play      string `json:"play"`
	Role      string `json:"role"`
	Playbook  string `json:"playbook"`
	HostName  string `json:"host_name"`
	EventData *struct {
		TaskUUID string `json:"task_uuid"`
		TaskPath string `json:"task_path"`
		Task     string `json:"task"`
		Name     string `json:"name"`
		Play     string `json:"play"`
		Role     string `json:"role"`
		Playbook string `json:"playbook"`
		// Processed: host → count, on playbook_on_stats; any other
		// JSON is ignored.
		Processed json.RawMessage `json:"processed"`
		// Res is a task result; only its integer rc is read.
		Res json.RawMessage `json:"res"`
	} `json:"event_data"`
}

// event checks and converts one event of a page.
func (r *rawEvent) event() (Event, error) {
	if r.Counter == nil {
		return Event{}, fmt.Errorf("event %q has no counter", r.UUID)
	}
	created, err := time.Parse(time.RFC3339Nano, r.Created)
	if err != nil {
		return Event{}, fmt.Errorf("event %d: cannot parse created time %q: want RFC 3339 like 2026-11-30T03:39:35.979439Z", *r.Counter, r.Created)
	}
	ev := Event{
		Counter: *r.Counter, Created: created.UTC(), Event: r.Event, UUID: r.UUID,
		Task: r.Task, Play: r.Play, Role: r.Role, Playbook: r.Playbook, HostName: r.HostName,
	}
	if d := r.EventData; d != nil {
		ev.TaskUUID, ev.TaskPath = d.TaskUUID, d.TaskPath
		// The top-level fields are AWX's copies of these, stripped and
		// truncated past 1024 characters; event_data is what runner sent,
		// as the job_events files hold it.
		ev.Task = firstNonEmpty(d.Task, d.Name, ev.Task)
		ev.Play = firstNonEmpty(d.Play, ev.Play)
		ev.Role = firstNonEmpty(d.Role, ev.Role)
		ev.Playbook = firstNonEmpty(d.Playbook, ev.Playbook)
		var processed map[string]json.RawMessage
		if ev.Event == EventStats && json.Unmarshal(d.Processed, &processed) == nil {
			ev.Hosts = len(processed)
		}
		var res struct {
			RC *int64 `json:"rc"`
		}
		if (ev.Event == "runner_on_failed" || ev.Event == "runner_item_on_failed") && json.Unmarshal(d.Res, &res) == nil && res.RC != nil {
			ev.Killed = ansible.KilledRC(*res.RC)
		}
	}
	if ev.TaskStart() && ev.TaskUUID == "" {
		ev.TaskUUID = ev.UUID
	}
	return ev, nil
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// JobID formats an AWX id (of a job or a template) as Peakline stores it.
func JobID(id int64) string { return strconv.FormatInt(id, 10) }
