// Package ansible reads what Ansible leaves on disk and turns it into jobs
// of per-task resource samples (Job, Task, Series), the shapes every other
// collector package and the ingest batch use.
//
// It owns:
//   - the readers of the three on-disk layouts (Read): an ansible-runner
//     private data dir (artifacts/<ident>/job_events + profiling_data), a
//     cgroup_perf_recap output dir (ansible-perf-*, CSV or JSON-seq, one file
//     per resource or per task) and the Tower/AWX playbook_profiling/<job_id>
//     dir, with the job's template and status (JobInfo) from env/extravars
//     and artifacts/<ident>/status;
//   - the parsing of one job event (JobEvent, EventReader, ListEventFiles,
//     IsTaskStart, ParseCreated), which the live follower reuses while a job
//     runs;
//   - the attribution of every sample to the job-event counter of the task
//     that was running when it was taken (see Read).
//
// It does not own sampling a running job (collector/live), sending batches
// to a server (collector/ship) or cgroups (collector/cgroup), and it imports
// no other Peakline package.
package ansible
