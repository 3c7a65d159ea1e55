// Package collector holds no code: it is the client side of Peakline, which
// turns what Ansible does into jobs of per-task resource samples and ships
// them to a Peakline server as JSON ingest batches. Its subpackages, one
// concern each:
//
//   - collector/ansible: reading Ansible trees after the fact (`peakline
//     import`) and the job, task and series shapes everything else uses;
//     where a job event is parsed.
//   - collector/live: sampling a running job (`peakline collect`, and the
//     per-job Session the agent runs). Where do a live job's events come
//     from? Its job_events follower, or any source filling its Events.
//   - collector/ship: how does a batch reach the server? Batches, the HTTP
//     client and its credentials, the retrying shipper and its spool;
//     ship/shiptest is the batch as a server decodes it, for tests.
//   - collector/cgroup: reading and creating Linux cgroups (v1 and v2).
//   - collector/awx: the AWX API client and the per-job follower that
//     reads a job's metadata and events from AWX; awx/awxtest is a fake
//     AWX server for tests.
//   - collector/discover: finding the AWX jobs running on a host in
//     cgroupfs and /proc, and the process-tree stats of a job with no
//     cgroup of its own.
//   - collector/agent: `peakline agent`, the node agent that ties them
//     together: discover finds jobs, live samples them with awx as the
//     event source, ship sends the batches.
//   - collector/progress: how far a long pass has come, on stderr: a
//     progress bar on a terminal, plain lines every few seconds elsewhere.
//   - collector/testscale: for tests only, the deadlines of tests of
//     real processes and kernels stretched by PEAKLINE_TEST_TIME_SCALE
//     (emulated kernels, make test-v2); the end-to-end tests use it too.
//
// The imports point one way: agent uses live, awx, discover, ship, cgroup
// and ansible; live uses ansible, ship and cgroup; awx uses ansible and
// ship (its token file and CA bundle are read as every client's are); ship
// uses ansible; ansible, cgroup, discover, awx/awxtest, ship/shiptest,
// progress and testscale use no other Peakline package. No collector package imports the server side
// (server, tsdb, downsample, web, bench). imports_test.go checks these
// arrows.
package collector
