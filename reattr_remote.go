package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/collector/ship"
	"github.com/peakline/peakline/tsdb"
)

// windowSamples is about how many samples one query of remoteJobs.read
// asks for: far below the server's --query-max-samples default (50
// million) and a response of a few megabytes.
const windowSamples = 50_000

// remoteJobs is the server of --server, over its HTTP API with the
// client's token: the jobs list, the Prometheus-compatible query API for
// the raw samples, DELETE /api/v1/jobs/{job} and the ingest.
type remoteJobs struct {
	base   string // without a trailing /
	client *ship.Client
}

// jobListEntry is what remoteJobs reads of a job in GET /api/v1/jobs.
type jobListEntry struct {
	JobID        string         `json:"job_id"`
	First        int64          `json:"first"`
	Last         int64          `json:"last"`
	Samples      map[string]int `json:"samples"`
	TemplateID   string         `json:"template_id"`
	TemplateName string         `json:"template_name"`
	Status       string         `json:"status"`
	Playbook     string         `json:"playbook"`
	Measured     string         `json:"measured"`
}

// get GETs path of the server's API with query q and decodes the JSON
// answer into dst; a refusal's status is returned with the error.
func (r *remoteJobs) get(ctx context.Context, path string, q url.Values, dst any) (int, error) {
	if err := r.client.Get(ctx, path, q, dst); err != nil {
		var se *ship.StatusError
		if errors.As(err, &se) {
			return se.StatusCode, fmt.Errorf("--server: %w%s", err, r.tokenHint(se.StatusCode))
		}
		return 0, fmt.Errorf("--server: %w", err)
	}
	return http.StatusOK, nil
}

func (r *remoteJobs) tokenHint(status int) string {
	if status != http.StatusUnauthorized && status != http.StatusForbidden {
		return ""
	}
	return " (re-attributing needs a token with the admin scope)"
}

// entry finds the job in the jobs list; nil when it is not there.
func (r *remoteJobs) entry(ctx context.Context, jobID string) (*jobListEntry, error) {
	cursor := ""
	for {
		q := url.Values{"q": {jobID}, "limit": {"5000"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Jobs []jobListEntry `json:"jobs"`
			Next string         `json:"next"`
		}
		if _, err := r.get(ctx, "/api/v1/jobs", q, &page); err != nil {
			return nil, err
		}
		for i := range page.Jobs {
			if page.Jobs[i].JobID == jobID {
				return &page.Jobs[i], nil
			}
		}
		if page.Next == "" {
			return nil, nil
		}
		cursor = page.Next
	}
}

// promMatrix is a Prometheus API answer to a range selector.
type promMatrix struct {
	Data struct {
		Result []struct {
			Metric map[string]string    `json:"metric"`
			Values [][2]json.RawMessage `json:"values"`
		} `json:"result"`
	} `json:"data"`
}

// read reads the job's raw samples through the Prometheus API: the range
// selector of the job's sample metrics over consecutive windows of its
// span, each sized for about windowSamples samples and halved when the
// server refuses it (a --query-max-samples below the default). The
// counts per resource are checked against the jobs list's.
func (r *remoteJobs) read(ctx context.Context, jobID string) (*ansible.Job, error) {
	e, err := r.entry(ctx, jobID)
	if err != nil || e == nil {
		return nil, err
	}
	total := 0
	for _, n := range e.Samples {
		total += n
	}
	if total == 0 {
		return nil, nil
	}
	j := &ansible.Job{ID: jobID, Source: "peakline", Info: ansible.JobInfo{TemplateID: e.TemplateID, TemplateName: e.TemplateName,
		Status: e.Status, Playbook: e.Playbook, Measured: e.Measured}}
	resourceOf := map[string]string{}
	var metrics []string
	for _, res := range tsdb.Resources {
		resourceOf[res.Metric] = res.Name
		metrics = append(metrics, res.Metric)
	}
	type seriesKey struct{ resource, counter, uuid, task string }
	index := map[seriesKey]int{}
	span := e.Last - e.First + 1
	window := max(1000, span/int64(max(1, total/windowSamples+1)))
	selector := fmt.Sprintf(`{__name__=~"%s",%s=%q}`, strings.Join(metrics, "|"), tsdb.LabelJob, jobID)
	for from := e.First - 1; from < e.Last; { // the window (from, from+window]
		to := from + window
		q := url.Values{"query": {fmt.Sprintf("%s[%dms]", selector, window)}, "time": {fmt.Sprintf("%d.%03d", to/1000, to%1000)}}
		var m promMatrix
		status, err := r.get(ctx, "/prometheus/api/v1/query", q, &m)
		if err != nil {
			if (status == http.StatusUnprocessableEntity || status == http.StatusServiceUnavailable || status == http.StatusBadRequest) && window > 1 {
				window /= 2 // too many samples for the server's limits: ask for less
				continue
			}
			return nil, err
		}
		for _, s := range m.Data.Result {
			res, ok := resourceOf[s.Metric["__name__"]]
			if !ok {
				continue
			}
			k := seriesKey{res, s.Metric[tsdb.LabelCounter], s.Metric[tsdb.LabelTaskUUID], s.Metric[tsdb.LabelTask]}
			i, ok := index[k]
			if !ok {
				counter, err := strconv.ParseInt(k.counter, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("--server: series %v: counter %q: %w", s.Metric, k.counter, err)
				}
				i = len(j.Series)
				index[k] = i
				j.Series = append(j.Series, ansible.Series{Resource: res, Counter: counter, UUID: k.uuid, Task: k.task})
			}
			ser := &j.Series[i]
			for _, tv := range s.Values {
				ms, err := parseSeconds(string(tv[0]))
				if err != nil {
					return nil, fmt.Errorf("--server: series %v: time %s: %w", s.Metric, tv[0], err)
				}
				if ms <= from || ms > to {
					continue // a server whose range selector is closed on the left
				}
				var vs string
				if err := json.Unmarshal(tv[1], &vs); err != nil {
					return nil, fmt.Errorf("--server: series %v: value %s: %w", s.Metric, tv[1], err)
				}
				v, err := strconv.ParseFloat(vs, 64)
				if err != nil {
					return nil, fmt.Errorf("--server: series %v: value %q: %w", s.Metric, vs, err)
				}
				ser.Ts = append(ser.Ts, ms)
				ser.Vs = append(ser.Vs, v)
			}
		}
		from = to
	}
	got := map[string]int{}
	for _, s := range j.Series {
		got[s.Resource] += len(s.Ts)
	}
	for _, res := range tsdb.Resources {
		if got[res.Name] != e.Samples[res.Name] {
			return nil, fmt.Errorf("--server: read %d %s samples of job %s through the query API, but the jobs list counts %d; nothing changed", got[res.Name], res.Name, jobID, e.Samples[res.Name])
		}
	}
	for _, s := range j.Series {
		j.Tasks = appendTask(j.Tasks, ansible.Task{Counter: s.Counter, UUID: s.UUID, Name: s.Task, StartMs: s.Ts[0]})
	}
	return j, nil
}

// appendTask adds t to tasks, or moves the start of the same task
// (counter and uuid) earlier.
func appendTask(tasks []ansible.Task, t ansible.Task) []ansible.Task {
	for i := range tasks {
		if tasks[i].Counter == t.Counter && tasks[i].UUID == t.UUID {
			tasks[i].StartMs = min(tasks[i].StartMs, t.StartMs)
			return tasks
		}
	}
	return append(tasks, t)
}

// parseSeconds parses the Prometheus API's time, unix seconds with up to
// three decimals, into exact milliseconds.
func parseSeconds(s string) (int64, error) {
	sec, frac, _ := strings.Cut(s, ".")
	if len(frac) > 3 {
		return 0, errors.New("finer than a millisecond")
	}
	n, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return 0, err
	}
	ms := int64(0)
	if frac != "" {
		if ms, err = strconv.ParseInt(frac+strings.Repeat("0", 3-len(frac)), 10, 64); err != nil {
			return 0, err
		}
	}
	return n*1000 + ms, nil
}

// remove deletes the job (DELETE /api/v1/jobs/{job}, admin scope). The
// server takes a write to it once its samples are gone; write waits.
func (r *remoteJobs) remove(ctx context.Context, jobID string) error {
	if err := r.client.Delete(ctx, "/api/v1/jobs/"+url.PathEscape(jobID)); err != nil {
		var se *ship.StatusError
		if errors.As(err, &se) {
			return fmt.Errorf("--server: %w%s", err, r.tokenHint(se.StatusCode))
		}
		return fmt.Errorf("--server: %w", err)
	}
	return nil
}

// write posts the job's ingest batches, each retried while the server
// answers that the job's deletion is pending (503 with Retry-After).
func (r *remoteJobs) write(ctx context.Context, j *ansible.Job) error {
	batches := ship.Batches(j, 0)
	for i := range batches {
		if err := r.client.SendPatiently(ctx, &batches[i], 5*time.Minute, nil); err != nil {
			return fmt.Errorf("--server: batch %d of %d: %w", i+1, len(batches), err)
		}
	}
	return nil
}

func (r *remoteJobs) finish(path string) string {
	s := "peakline import --server " + r.base
	if r.client.TokenFile != "" {
		s += " --token-file " + r.client.TokenFile
	}
	return s + " " + path
}
