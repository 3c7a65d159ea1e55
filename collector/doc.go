// Package collector is the client side of Peakline: it turns what Ansible
// leaves on disk into jobs of per-task resource samples and ships them to a
// Peakline server as JSON ingest batches.
//
// It owns:
//   - the readers of the three on-disk layouts (Read): an ansible-runner
//     private data dir (artifacts/<ident>/job_events + profiling_data), a
//     cgroup_perf_recap output dir (ansible-perf-*, CSV or JSON-seq, one file
//     per resource or per task) and the Tower/AWX playbook_profiling/<job_id>
//     dir;
//   - the attribution of every sample to the job-event counter of the task
//     that was running when it was taken (see Read);
//   - the wire side: splitting a Job into ingest batches (Job.Batches) and
//     the HTTP client that posts them (Client);
//   - the credentials and trust of every client of a server (Transport): a
//     bearer token read from a file, a CA bundle, a client certificate for
//     mutual TLS.
//
// It does not own storage, downsampling or serving: it imports no other
// Peakline package, and the server decodes the batches with its own types.
// The live cgroup sampler and the job-events follower live in their own
// files and subpackages.
package collector
