// Package ship is how a batch reaches the server: it splits a job into
// JSON ingest batches (Batch, Batches; docs/CONTRACTS.md), posts them
// gzip-compressed (Client, Encoder), and, for a collector that runs
// unattended, queues, retries and spools them (Shipper, Spool) so that a
// server outage or a restart loses nothing.
//
// It owns the credentials and trust of every client of a server
// (Transport, TransportConfig: a bearer token read from a file, a CA
// bundle, a client certificate for mutual TLS) and what a refusal means
// (AuthError, ErrRejected, StatusError).
//
// Its Batch, Task, Event, Series and JobInfo are the batch's wire format
// (wire.go, pinned by testdata/batch.golden.json), converted from
// collector/ansible's Job. It does not read Ansible trees or sample
// anything (collector/live), and the server decodes the batches with its
// own types.
package ship
