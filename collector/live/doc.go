// Package live samples a running Ansible job: `peakline collect` runs a
// command in a fresh cgroup (or attaches to one), reads its CPU, memory and
// PIDs on a schedule (sampler), follows the job's events as ansible-runner
// writes them to learn which task runs when (the job_events follower), and
// attributes each sample to its task before handing batches to the shipper
// (batcher). It also asks the server's collection policy whether to collect
// at all (policy).
//
// Where the events come from: the job_events follower (follow.go), which
// tails artifacts/<ident>/job_events and finds that directory from an
// `ansible-runner run` command line (follow_runner.go).
//
// It does not own parsing an event file or the shapes of a job
// (collector/ansible), sending and spooling batches (collector/ship) or
// reading cgroup files (collector/cgroup); it uses all three.
package live
