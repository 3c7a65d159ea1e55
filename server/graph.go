package server

import (
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/peakline/peakline/downsample"
	"github.com/peakline/peakline/tsdb"
)

// graph answers GET /api/v1/jobs/{job}/graph?points=N&from=MS&to=MS&algorithm=NAME.
func (s *Server) graph(c echo.Context) error {
	jobID, err := jobParam(c)
	if err != nil {
		return err
	}
	points, err := intParam(c, "points", downsample.DefaultPoints)
	if err != nil {
		return err
	}
	if points < downsample.MinPoints || points > downsample.MaxPoints {
		return badRequest("points: must be an integer between %d and %d, got %d", downsample.MinPoints, downsample.MaxPoints, points)
	}
	fromMs, toMs, err := window(c)
	if err != nil {
		return err
	}
	algo := c.QueryParam("algorithm")
	if algo != "" && !validAlgorithm(algo) {
		return badRequest("algorithm: must be one of %s, got %q", strings.Join(downsample.Names(), ", "), algo)
	}
	job, err := s.store.ReadJob(c.Request().Context(), jobID, fromMs, toMs)
	if err != nil {
		return err
	}
	cols, spans := graphInput(job)
	req := downsample.GraphRequest{
		JobID: jobID, Points: points, Algorithm: algo,
		FromMs: fromMs, ToMs: toMs, EventsURL: s.eventsURL(jobID),
	}
	if job.LastEvent != nil {
		req.LastCounter = job.LastEvent.Counter
	}
	// An open window is reported as the job's own span.
	if fromMs == math.MinInt64 || toMs == math.MaxInt64 {
		first, last := job.Span()
		if fromMs == math.MinInt64 {
			req.FromMs = first
		}
		if toMs == math.MaxInt64 {
			req.ToMs = last
		}
	}
	p, err := downsample.BuildGraph(req, cols, spans)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, graphAnswer{Payload: p, TemplateID: job.Info.TemplateID, TemplateName: job.Info.TemplateName})
}

// graphAnswer is the graph payload with the job's template, when it has
// one (left out otherwise), so the job page can show how the run compares
// with the template's other runs.
type graphAnswer struct {
	*downsample.Payload
	TemplateID   string `json:"template_id,omitempty"`
	TemplateName string `json:"template_name,omitempty"`
}

// taskList is the answer of GET /api/v1/jobs/{job}/tasks.
type taskList struct {
	JobID     string                   `json:"job_id"`
	Tasks     []downsample.TaskSummary `json:"tasks"`
	EventsURL string                   `json:"events_url,omitempty"`
}

// tasks answers GET /api/v1/jobs/{job}/tasks: every task with exact
// statistics over the whole job.
func (s *Server) tasks(c echo.Context) error {
	jobID, err := jobParam(c)
	if err != nil {
		return err
	}
	job, err := s.store.ReadJob(c.Request().Context(), jobID, math.MinInt64, math.MaxInt64)
	if err != nil {
		return err
	}
	cols, spans := graphInput(job)
	var last int64
	if job.LastEvent != nil {
		last = job.LastEvent.Counter
	}
	return c.JSON(http.StatusOK, taskList{JobID: jobID, Tasks: downsample.Summaries(cols, spans, last), EventsURL: s.eventsURL(jobID)})
}

// eventsURL fills {job_id} into the events template.
func (s *Server) eventsURL(jobID string) string {
	if s.cfg.EventsURL == "" {
		return ""
	}
	return strings.ReplaceAll(s.cfg.EventsURL, "{job_id}", url.PathEscape(jobID))
}

// graphInput converts a stored job into downsample's plain columns.
func graphInput(job *tsdb.Job) ([]downsample.Column, []downsample.TaskSpan) {
	cols := make([]downsample.Column, len(job.Columns))
	for i, c := range job.Columns {
		cols[i] = downsample.Column{Resource: c.Resource.Name, Unit: c.Resource.Unit, Ts: c.Ts, Vs: c.Vs, Task: c.Task}
	}
	spans := make([]downsample.TaskSpan, len(job.Tasks))
	for i, t := range job.Tasks {
		spans[i] = downsample.TaskSpan{Counter: t.Counter, UUID: t.UUID, Name: t.Name, StartMs: t.StartMs, EndMs: t.EndMs}
	}
	return cols, spans
}

func validAlgorithm(name string) bool {
	for _, n := range downsample.Names() {
		if n == name {
			return true
		}
	}
	return false
}

// intParam parses an optional integer query parameter.
func intParam(c echo.Context, name string, def int) (int, error) {
	raw := c.QueryParam(name)
	if raw == "" {
		return def, nil
	}
	v, err := strconv.Atoi(raw)
	if err != nil {
		return 0, badRequest("%s: must be an integer, got %q", name, raw)
	}
	return v, nil
}

// window parses from/to (unix ms). Absent bounds are open.
func window(c echo.Context) (fromMs, toMs int64, err error) {
	fromMs, toMs = math.MinInt64, math.MaxInt64
	for _, p := range []struct {
		name string
		dst  *int64
	}{{"from", &fromMs}, {"to", &toMs}} {
		raw := c.QueryParam(p.name)
		if raw == "" {
			continue
		}
		v, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || v < 0 {
			return 0, 0, badRequest("%s: must be a unix time in milliseconds, got %q", p.name, raw)
		}
		*p.dst = v
	}
	if fromMs > toMs {
		return 0, 0, badRequest("from: must not be after to (from=%d, to=%d)", fromMs, toMs)
	}
	return fromMs, toMs, nil
}

// jobParam is the job id of the path, %-decoded.
func jobParam(c echo.Context) (string, error) {
	id, err := pathParam(c, "job")
	if err != nil {
		return "", badRequest("job: the job id in the path is not properly escaped: %v", err)
	}
	return id, nil
}

// pathParam is a path parameter, %-decoded once. Echo routes on the raw
// path when the request has one (an escaped "/" as in "a%2Fb"), and then
// hands out parameters still escaped; otherwise on the decoded path,
// whose parameters must not be decoded twice ("50%25off" is "50%off").
func pathParam(c echo.Context, name string) (string, error) {
	if c.Request().URL.RawPath == "" {
		return c.Param(name), nil
	}
	return url.PathUnescape(c.Param(name))
}
