// Package live samples a running Ansible job. `peakline collect` (Collect)
// runs a command in a fresh cgroup (or attaches to one), asks the server's
// collection policy first (policy.go), and runs one Session for the job.
//
// A Session is the per-job part, shared by collect and the agent: it reads
// a Stats (a cgroup, or a process tree) on a schedule (sampler.go),
// attributes every sample to the task its Events say was running, waiting
// for the events to catch up (up to Settle while the source answers, until
// it answers again while it does not: batcher.go), and hands
// gzip-encoded ingest batches to a sender, normally a ship.Shipper.
// Samples are stamped on a timeline (clock.go): the wall clock when the
// session starts plus the monotonic time since. A wall clock step is
// logged; a forward one re-anchors the timeline to the wall clock, a
// backward one moves no sample until the wall clock catches up.
//
// Where do a job's events come from? Events holds what a source has seen;
// collect's source is the job_events follower (follow.go), which tails
// artifacts/<ident>/job_events and finds that directory from an
// `ansible-runner run` command line (follow_runner.go); for
// ansible-playbook, collect writes its own Ansible callback plugin
// (ansiblecb/peakline_events.py, embedded) into a temporary directory and
// enables it through Ansible's environment, and the plugin writes the same
// files for the follower (playbook.go). For other commands, or when no
// event arrived by the end, collect says once that no task is attributed.
// The agent's source is the AWX API (collector/awx), which adds to Events
// the same way. Each source also tells Events when it last answered, so
// that a source that is down is told apart from a task that writes no
// events.
//
// It does not own parsing an event file or the shapes of a job
// (collector/ansible), sending and spooling batches (collector/ship) or
// reading cgroup files (collector/cgroup); it uses all three.
package live
