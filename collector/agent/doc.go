// Package agent is `peakline agent`: one long-running process per AWX
// execution node (a podman host or a Kubernetes node) that finds every AWX
// job running there, samples it as `peakline collect --attach` does, and
// attributes the samples to the job's tasks by following the job's events
// through the AWX API.
//
// It owns the jobs' lifecycle on the node: when a scan (collector/discover)
// finds a new job it opens the job's cgroup (collector/cgroup), or, when the
// job has no cgroup of its own, its process tree; it starts a sampling
// session (collector/live) whose event source is the job's AWX follower
// (collector/awx); it stops sampling when the cgroup is empty or gone,
// keeps following AWX until the job's events are complete (bounded), then
// flushes the job's last samples and forgets it. One shipper with one
// spool directory (collector/ship) carries every job's batches.
//
// It asks AWX what each id found is (a unified job of some type, or
// nothing AWX knows) and measures only the types Config.JobTypes names;
// an id AWX does not know is never stored. It obeys the server's
// collection policy (live.FetchPolicy, as `peakline collect` does, with
// the ingest token): a job's session holds its samples until AWX names
// the job's template and the server says whether to collect it; a
// declined job's samples are dropped and the job is left alone while it
// runs. A policy that cannot be read is said as an error and
// Config.PolicyFallback decides; a job AWX never describes follows the
// server's system setting.
//
// It does not own how jobs are found (collector/discover), how samples are
// taken and attributed (collector/live), how AWX is asked (collector/awx),
// or how batches reach the server (collector/ship). It opens no listening
// socket.
package agent
