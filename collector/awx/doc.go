// Package awx reads an AWX job's metadata and job events from the AWX REST
// API, for jobs whose events are not on the node's disk: AWX 19 and later run
// ansible-runner in worker mode inside an execution-environment container,
// where the events stream to receptor on stdout and no
// artifacts/<ident>/job_events/*.json file is written.
//
// It owns:
//   - the API client (Client): a base URL, a read-only bearer token read from
//     a file and sent to that AWX host only, a CA bundle, a per-request
//     timeout, a bound on the bytes and events of one answer, a limit on the
//     requests in flight across all jobs, and typed errors (AuthError,
//     ErrJobNotFound, RetryableError) with the backoff that 429, 5xx and
//     network errors call for (Backoff);
//   - the per-job follower (Follower), one request per poll at most, which
//     keeps its position in the job's events through AWX outages and hands
//     them, in counter order, to a Sink (a session's live.Events), where
//     they become the task starts samples are attributed to;
//   - the import workflows (import.go, reattr.go): reading an AWX job's
//     metadata and events for `peakline import --awx-url`, and
//     re-attributing a job already stored (Reattribute) over StoredJobs, the
//     store's read, delete and write that main wires to the embedded store
//     or a running server, with the kept copy of the result (KeepJob,
//     ReadKeptJob) and the check that the stored job is then the same;
//   - in awx/awxtest, a fake AWX API server for tests that serves real
//     ansible-runner job_events directories in the API's shape.
//
// It does not own sampling, attribution of samples to tasks or shipping:
// those stay in collector/live, collector/ansible and collector/ship, which
// take the events this package reads (Event.JobEvent, Job.Info). It imports
// collector/ansible, and collector/ship for reading the token file and the
// CA bundle as every client does and for the ingest batches of the kept
// copy.
//
// The AWX API facts relied on, read from the AWX sources (ansible/awx,
// releases 21 to 24):
//   - GET /api/v2/jobs/{id}/ answers the job: id, name, status (new, pending,
//     waiting, running, successful, failed, error, canceled), job_template
//     (the template's id, or null), playbook, execution_node, started,
//     finished, event_processing_finished, and
//     summary_fields.job_template.{id,name} (awx/api/serializers.py,
//     JobSerializer and UnifiedJobSerializer).
//   - GET /api/v2/jobs/{id}/job_events/ lists the job's events, filtered by
//     any model field with Django lookups (counter__gt, counter__gte,
//     counter__lte) and sorted by order_by. Lists are paginated as {count,
//     next, previous, results}; page_size is capped at 200 (MAX_PAGE_SIZE) and
//     next/previous are the request's own path and query with page replaced,
//     relative, without scheme or host (awx/api/pagination.py, get_next_link
//     uses request.get_full_path()).
//   - A job event has counter, created (ISO 8601 UTC with microseconds and a
//     Z), event, uuid, parent_uuid, host_name, playbook, play, task, role and
//     event_data (task_uuid, task_path, is_conditional, …) (awx/main/models/
//     events.py, BasePlaybookEvent). Handlers start as playbook_on_task_start
//     with event_data.is_conditional true; playbook_on_stats is the last
//     event of a playbook.
//   - Every unified job (playbook job, ad hoc command, project update,
//     inventory update, system job, workflow job) draws its id from one
//     sequence, and all but the workflow job run ansible-runner with that
//     id as ident (ansible_runner_<id>, pod automation-job-<id>).
//     GET /api/v2/unified_jobs/?id=N lists the one job of the id, each
//     item in its own type's list shape with type and url
//     (UnifiedJobListSerializer, which leaves event_processing_finished
//     out); an id AWX does not know, or the token's user may not see,
//     gives count 0. The events of a playbook job are at
//     /api/v2/jobs/N/job_events/, those of the other types at
//     /api/v2/<type>s/N/events/ (awx/api/urls). An ad hoc command's
//     events (AdHocCommandEventSerializer: counter, created, event,
//     uuid, host_name, event_data, stdout, …) have no task, play or
//     parent_uuid fields and no playbook_on_task_start: runner emits
//     playbook_on_start, runner_on_start per host, runner_on_ok/failed,
//     playbook_on_stats (its WRAPUP_EVENT), so the module's first
//     runner_on_start is taken as its one task's start.
//   - Authentication with "Authorization: Bearer <token>" (an OAuth2
//     personal access token with read scope); 401 without or with a bad
//     token, 403 when the token's user may not read the job.
//   - Events are saved by the callback receiver a second or two after they
//     happen, so a running job's list lags; the job's status can turn final
//     before its last events are saved, which event_processing_finished tells.
package awx
