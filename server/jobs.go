package server

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/peakline/peakline/server/graphpayload"
	"github.com/peakline/peakline/tsdb"
)

// jobEntry is one job in GET /api/v1/jobs; first and last are the job's
// span.
type jobEntry struct {
	JobID   string                  `json:"job_id"`
	First   int64                   `json:"first"`
	Last    int64                   `json:"last"`
	Tasks   int                     `json:"tasks"`
	Samples map[string]int          `json:"samples"`
	Peaks   map[string]resourcePeak `json:"peaks"`
	// The job's template and status (tsdb.JobInfo); "" when unknown.
	TemplateID   string `json:"template_id"`
	TemplateName string `json:"template_name"`
	// Status is the job's state: running, successful, failed, canceled
	// or unknown (jobState); ReportedStatus the status its sender
	// reported ("" when none), e.g. AWX's "error" for a failed job.
	Status         string `json:"status"`
	ReportedStatus string `json:"reported_status"`
	Playbook       string `json:"playbook"`
	// Measured is how the samples were measured: "cgroup", "process-tree"
	// (summed over the job's processes: see tsdb.MeasuredProcessTree) or
	// "" when the sender did not say.
	Measured string `json:"measured"`
	// Sizing is what the job's info says of its memory limit, OOM kills
	// and forks; absent when it says none.
	Sizing *graphpayload.Sizing `json:"sizing,omitempty"`
	// Error says why a job could not be read (damaged storage); its
	// other fields are then empty.
	Error string `json:"error,omitempty"`
}

// resourcePeak is a job's high-water mark of one resource and the task
// it was taken in: its counter (0 when unknown) and name.
type resourcePeak struct {
	T       int64   `json:"t"`
	V       float64 `json:"v"`
	Counter int64   `json:"counter"`
	Task    string  `json:"task"`
}

// Paging of GET /api/v1/jobs.
const (
	defaultJobsLimit = 200
	maxJobsLimit     = 5000
)

// jobsPage is the answer of GET /api/v1/jobs: one page of jobs and the
// cursor of the next ("" on the last page), and how many jobs match q in
// all pages.
type jobsPage struct {
	Jobs  []jobEntry `json:"jobs"`
	Next  string     `json:"next"`
	Total int        `json:"total"`
}

// listJobs answers GET /api/v1/jobs?limit=N&cursor=C&q=TEXT&template=ID&status=S:
// the jobs whose id contains q (any case), with template, whose
// template id is ID (tsdb.Store.TemplateJobs) and, with status, whose
// state is one of S (comma-separated, see jobState), newest first (by first time, then id),
// at most limit of them after the cursor. The order comes from the jobs'
// spans (chunk bounds, tsdb.Store.Spans), so only the jobs of the page
// are summarised. A cursor names the last job of a page by its sort key,
// so jobs added or deleted meanwhile neither repeat nor shift a page.
func (s *Server) listJobs(c echo.Context) error {
	limit, err := jobsLimit(c.QueryParam("limit"))
	if err != nil {
		return err
	}
	var after *tsdb.Span
	if cur := c.QueryParam("cursor"); cur != "" {
		sp, err := decodeJobsCursor(cur)
		if err != nil {
			return err
		}
		after = &sp
	}
	q := strings.ToLower(c.QueryParam("q"))
	ctx := c.Request().Context()
	var ofTemplate map[string]bool
	if tmpl, ok := c.QueryParams()["template"]; ok {
		if ofTemplate, err = s.templateJobSet(c, tmpl[0]); err != nil {
			return err
		}
	}
	states, err := parseStates(c.QueryParams()["status"])
	if err != nil {
		return err
	}
	spans, err := s.store.Spans(ctx)
	if err != nil {
		return err
	}
	if states != nil {
		if spans, err = s.spansInStates(ctx, spans, states); err != nil {
			return err
		}
	}
	matched := spans[:0]
	total := 0
	for _, sp := range spans {
		if q != "" && !strings.Contains(strings.ToLower(sp.ID), q) {
			continue
		}
		if ofTemplate != nil && !ofTemplate[sp.ID] {
			continue
		}
		total++
		if after == nil || newerJob(*after, sp) < 0 {
			matched = append(matched, sp)
		}
	}
	slices.SortFunc(matched, newerJob)
	page := jobsPage{Jobs: []jobEntry{}, Total: total}
	if len(matched) > limit {
		matched = matched[:limit]
		page.Next = encodeJobsCursor(matched[limit-1])
	}
	release, err := s.reads.reserve(c, fmt.Sprintf("a page of %d of %d jobs", len(matched), len(spans)),
		int64(len(spans))*listSpanBytes+int64(len(matched))*listJobBytes)
	if err != nil {
		return err
	}
	defer release()
	for _, sp := range matched {
		sum, err := s.store.Summary(ctx, sp.ID)
		if errors.Is(err, tsdb.ErrJobNotFound) {
			page.Total-- // deleted since it was listed
			continue
		}
		if err != nil {
			// A job that cannot be read is listed with its error (and
			// logged) rather than failing the whole list.
			if ctx.Err() != nil {
				return ctx.Err()
			}
			s.logger.Error("list jobs: read job", "job", sp.ID, "err", err)
			page.Jobs = append(page.Jobs, jobEntry{JobID: sp.ID, First: sp.FirstMs, Last: sp.LastMs, Samples: map[string]int{}, Peaks: map[string]resourcePeak{}, Error: err.Error()})
			continue
		}
		e := jobEntry{JobID: sp.ID, First: sp.FirstMs, Last: sp.LastMs, Tasks: sum.Tasks,
			Samples: map[string]int{}, Peaks: map[string]resourcePeak{},
			TemplateID: sum.Info.TemplateID, TemplateName: sum.Info.TemplateName,
			Status: jobState(sum.Info.Status), ReportedStatus: sum.Info.Status,
			Playbook: sum.Info.Playbook, Measured: sum.Info.Measured,
			Sizing: sizingEntry(sum)}
		for _, r := range sum.Resources {
			e.Samples[r.Resource.Name] = r.Samples
			// What the job waited for is no resource it used: no peak.
			if r.Samples > 0 && !r.Resource.Stall {
				e.Peaks[r.Resource.Name] = resourcePeak{T: r.PeakMs, V: r.Peak, Counter: r.PeakCounter, Task: r.PeakTask}
			}
		}
		page.Jobs = append(page.Jobs, e)
	}
	return c.JSON(http.StatusOK, page)
}

// spansInStates keeps the spans of the jobs whose state is in states,
// reading each job's info alone (tsdb.Store.JobInfos), not its samples.
func (s *Server) spansInStates(ctx context.Context, spans []tsdb.Span, states map[string]bool) ([]tsdb.Span, error) {
	ids := make([]string, len(spans))
	for i, sp := range spans {
		ids[i] = sp.ID
	}
	infos, err := s.store.JobInfos(ctx, ids)
	if err != nil {
		return nil, err
	}
	kept := spans[:0]
	for i, sp := range spans {
		if states[jobState(infos[i].Status)] {
			kept = append(kept, sp)
		}
	}
	return kept, nil
}

// templateJobSet returns the set of jobs of the template named by the
// template parameter.
func (s *Server) templateJobSet(c echo.Context, id string) (map[string]bool, error) {
	if err := checkTemplateID("template", id); err != nil {
		return nil, err
	}
	ids, err := s.store.TemplateJobs(c.Request().Context(), id)
	if err != nil {
		return nil, err
	}
	set := make(map[string]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	return set, nil
}

// checkTemplateID refuses a template id no job can carry.
func checkTemplateID(field, id string) error {
	if id == "" || len(id) > tsdb.MaxTemplateIDLen {
		return badRequest("%s: must be a job template id of 1 to %d bytes, got %q", field, tsdb.MaxTemplateIDLen, id)
	}
	return nil
}

// newerJob orders jobs newest first: by first time descending, then id.
func newerJob(a, b tsdb.Span) int {
	if c := cmp.Compare(b.FirstMs, a.FirstMs); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

func jobsLimit(v string) (int, error) {
	return countParam("limit", v, defaultJobsLimit, maxJobsLimit, "whole number")
}

// countParam parses the query parameter name, a what (a whole number)
// from 1 to most; empty, it is def.
func countParam(name, v string, def, most int, what string) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, badRequest("%s: must be a %s from 1 to %d, got %q", name, what, most, v)
	}
	return n, nil
}

// encodeJobsCursor makes the opaque cursor after sp: its sort key.
func encodeJobsCursor(sp tsdb.Span) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(sp.FirstMs, 10) + " " + sp.ID))
}

func decodeJobsCursor(cur string) (tsdb.Span, error) {
	bad := badRequest("cursor: is not one this server gave in \"next\"; start again without it")
	raw, err := base64.RawURLEncoding.DecodeString(cur)
	if err != nil {
		return tsdb.Span{}, bad
	}
	first, id, ok := strings.Cut(string(raw), " ")
	ms, err := strconv.ParseInt(first, 10, 64)
	if !ok || err != nil {
		return tsdb.Span{}, bad
	}
	return tsdb.Span{ID: id, FirstMs: ms}, nil
}

// deleteJob answers DELETE /api/v1/jobs/{job}. When it answers, the
// deletion is durable and the job gone from every API; its samples are
// removed from disk in the background (tsdb.Store.Delete).
func (s *Server) deleteJob(c echo.Context) error {
	id, err := jobParam(c)
	if err != nil {
		return err
	}
	if err := s.store.Delete(c.Request().Context(), id); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]string{"job_id": id, "status": "deleted"})
}
