// Package collector holds no code: it is the client side of Peakline, which
// turns what Ansible does into jobs of per-task resource samples and ships
// them to a Peakline server as JSON ingest batches. Its subpackages, one
// concern each:
//
//   - collector/ansible: reading Ansible trees after the fact (`peakline
//     import`) and the job, task and series shapes everything else uses;
//     where a job event is parsed.
//   - collector/live: sampling a running job (`peakline collect`). Where do
//     a live job's events come from? Its job_events follower.
//   - collector/ship: how does a batch reach the server? Batches, the HTTP
//     client and its credentials, the retrying shipper and its spool.
//   - collector/cgroup: reading and creating Linux cgroups (v1 and v2).
//
// The imports point one way: live uses ansible, ship and cgroup; ship uses
// ansible; ansible and cgroup use no other Peakline package.
package collector
