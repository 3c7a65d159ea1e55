package main

// import --awx-url URL --job N without a PATH: re-attribute a job already
// stored in Peakline (awx.Reattribute) in the embedded store of --data or
// the server of --server. Both read the job through a tsdb.Store (the
// embedded one, or one over the server's Prometheus API) and storedJob.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/collector/awx"
	"github.com/peakline/peakline/collector/ship"
	"github.com/peakline/peakline/server"
	"github.com/peakline/peakline/tsdb"
)

// reattrOptions are the flags of import --awx-url without a PATH.
type reattrOptions struct {
	dataDir, serverURL string
	tokenFile          string          // --token-file, named in refusals
	transport          *ship.Transport // of --server
	awx                awx.Config
	reattr             awx.ReattrOptions
}

// reattributeStored reads AWX job --job and re-attributes its stored
// samples in the store --data or --server names.
func reattributeStored(ctx context.Context, o reattrOptions, stdout, stderr io.Writer, log *slog.Logger) error {
	a, err := fetchAWXJob(ctx, o.awx, o.reattr.JobFlag, nil, stderr, log)
	if err != nil {
		return err
	}
	var store awx.StoredJobs
	if o.dataDir != "" {
		srv, err := server.Open(server.Setup{DataDir: o.dataDir}, log, nil)
		if err != nil {
			return fmt.Errorf("%w (is a peakline serve using it? then import with --server)", err)
		}
		defer srv.Close()
		store = &localJobs{srv: srv, dataDir: o.dataDir}
	} else {
		r, err := openRemoteJobs(o.serverURL, o.transport, o.tokenFile, log)
		if err != nil {
			return err
		}
		defer r.store.Close()
		store = r
	}
	return awx.Reattribute(ctx, a, store, o.reattr, stdout, log)
}

// storedJob reads job jobID of s, every sample with its time and value,
// as the job re-attribution works on: one series per resource and stored
// task, the stored tasks and info. nil when s holds no sample of it.
func storedJob(ctx context.Context, s *tsdb.Store, jobID string) (*ansible.Job, error) {
	tj, err := s.ReadJob(ctx, jobID, math.MinInt64, math.MaxInt64)
	if errors.Is(err, tsdb.ErrJobNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	num := func(v string) int64 { n, _ := strconv.ParseInt(v, 10, 64); return n } // the store keeps decimals
	j := &ansible.Job{ID: jobID, Source: "peakline", Info: ansible.JobInfo{TemplateID: tj.Info.TemplateID, TemplateName: tj.Info.TemplateName,
		Status: tj.Info.Status, Playbook: tj.Info.Playbook, Measured: tj.Info.Measured,
		Forks: int(num(tj.Info.Forks)), Hosts: int(num(tj.Info.Hosts)), MemoryLimitBytes: num(tj.Info.MemoryLimit),
		OOMKills: int(num(tj.Info.OOMKills)), OOMCounter: num(tj.Info.OOMCounter),
		ProjectRevision: tj.Info.ProjectRevision, EEImage: tj.Info.EEImage}}
	for _, t := range tj.Tasks {
		j.Tasks = append(j.Tasks, ansible.Task{Counter: t.Counter, UUID: t.UUID, Name: t.Name, StartMs: t.StartMs, EndMs: t.EndMs, Play: t.Play, Role: t.Role, Path: t.Path})
	}
	for _, c := range tj.Columns {
		index := map[int32]int{} // task -> series of this column
		for i, t := range c.Ts {
			k, ok := index[c.Task[i]]
			if !ok {
				task := tj.Tasks[c.Task[i]]
				k = len(j.Series)
				index[c.Task[i]] = k
				j.Series = append(j.Series, ansible.Series{Resource: c.Resource.Name, Counter: task.Counter, UUID: task.UUID, Task: task.Name})
			}
			j.Series[k].Ts = append(j.Series[k].Ts, t)
			j.Series[k].Vs = append(j.Series[k].Vs, c.Vs[i])
		}
	}
	if j.Samples() == 0 {
		return nil, nil
	}
	return j, nil
}

// localJobs is the embedded store of --data.
type localJobs struct {
	srv     *server.Server
	dataDir string
}

func (l *localJobs) Read(ctx context.Context, jobID string) (*ansible.Job, error) {
	return storedJob(ctx, l.srv.Store(), jobID)
}

func (l *localJobs) Remove(ctx context.Context, jobID string) error {
	if err := l.srv.Store().Delete(ctx, jobID); err != nil {
		return err
	}
	// The store takes no write to the job until its samples are gone.
	return l.srv.Store().WaitDeletes(ctx)
}

func (l *localJobs) Write(ctx context.Context, j *ansible.Job) error {
	_, err := ingestJob(ctx, l.srv, j)
	return err
}

func (l *localJobs) Finish(path string) string {
	return fmt.Sprintf("peakline import --data %s %s", l.dataDir, path)
}

// remoteJobs is the server of --server with the client's token: it reads
// through a store over the server's Prometheus API (/prometheus), deletes
// by DELETE /api/v1/jobs/{job} and writes by the ingest.
type remoteJobs struct {
	base   string // without a trailing /
	store  *tsdb.Store
	client *ship.Client
	tr     *ship.Transport // nil: no token, the default transport
}

// openRemoteJobs opens the store over the Prometheus API of the server at
// serverURL, read through rt. It keeps no cache: a read after the write
// sees the server's answer.
func openRemoteJobs(serverURL string, tr *ship.Transport, tokenFile string, log *slog.Logger) (*remoteJobs, error) {
	base := strings.TrimRight(serverURL, "/")
	hc := &http.Client{}
	if tr != nil {
		hc.Transport = tr
	}
	store, err := tsdb.OpenRemote(tsdb.Remote{WriteURL: base + "/prometheus/api/v1/write", QueryURL: base + "/prometheus", HTTP: hc},
		tsdb.Options{CacheSamples: -1}, log, nil)
	if err != nil {
		return nil, fmt.Errorf("--server: %w", err)
	}
	return &remoteJobs{base: base, store: store, client: &ship.Client{BaseURL: base, HTTP: hc, TokenFile: tokenFile}, tr: tr}, nil
}

func (r *remoteJobs) Read(ctx context.Context, jobID string) (*ansible.Job, error) {
	j, err := storedJob(ctx, r.store, jobID)
	if err != nil && r.tr != nil && r.tr.Refusal() != nil {
		return nil, fmt.Errorf("--server: %w", r.tr.Refusal()) // says it all: the token is refused
	}
	if err != nil {
		return nil, fmt.Errorf("--server: %w", err)
	}
	return j, nil
}

// Remove deletes the job (DELETE /api/v1/jobs/{job}, admin scope). The
// server takes a write to it once its samples are gone; Write waits.
func (r *remoteJobs) Remove(ctx context.Context, jobID string) error {
	if err := r.client.Delete(ctx, "/api/v1/jobs/"+url.PathEscape(jobID)); err != nil {
		var se *ship.StatusError
		if errors.As(err, &se) && (se.StatusCode == http.StatusUnauthorized || se.StatusCode == http.StatusForbidden) {
			return fmt.Errorf("--server: %w (re-attributing needs a token with the admin scope)", err)
		}
		return fmt.Errorf("--server: %w", err)
	}
	return nil
}

// Write posts the job's ingest batches, each retried while the server
// answers that the job's deletion is pending (503 with Retry-After).
func (r *remoteJobs) Write(ctx context.Context, j *ansible.Job) error {
	batches := ship.Batches(j, 0)
	for i := range batches {
		if err := r.client.SendPatiently(ctx, &batches[i], 5*time.Minute, nil); err != nil {
			return fmt.Errorf("--server: batch %d of %d: %w", i+1, len(batches), err)
		}
	}
	return nil
}

func (r *remoteJobs) Finish(path string) string {
	s := "peakline import --server " + r.base
	if r.client.TokenFile != "" {
		s += " --token-file " + r.client.TokenFile
	}
	return s + " " + path
}
