package server

import (
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/peakline/peakline/downsample"
	"github.com/peakline/peakline/server/graphpayload"
	"github.com/peakline/peakline/tsdb"
	"github.com/peakline/peakline/tsdb/history"
)

// graph answers GET /api/v1/jobs/{job}/graph?points=N&from=MS&to=MS&algorithm=NAME.
func (s *Server) graph(c echo.Context) error {
	jobID, err := jobParam(c)
	if err != nil {
		return err
	}
	points, err := intParam(c, "points", graphpayload.DefaultPoints)
	if err != nil {
		return err
	}
	if points < graphpayload.MinPoints || points > graphpayload.MaxPoints {
		return badRequest("points: must be an integer between %d and %d, got %d", graphpayload.MinPoints, graphpayload.MaxPoints, points)
	}
	fromMs, toMs, err := window(c)
	if err != nil {
		return err
	}
	algo := c.QueryParam("algorithm")
	if algo != "" && !validAlgorithm(algo) {
		return badRequest("algorithm: must be one of %s, got %q", strings.Join(downsample.Names(), ", "), algo)
	}
	release, err := s.reserveJobRead(c, jobID)
	if err != nil {
		return err
	}
	defer release()
	job, err := s.store.ReadJob(c.Request().Context(), jobID, fromMs, toMs)
	if err != nil {
		return err
	}
	cols, spans := graphInput(job)
	req := graphpayload.GraphRequest{
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
	p, err := graphpayload.BuildGraph(req, cols, spans)
	if err != nil {
		return err
	}
	p.TemplateID, p.TemplateName = job.Info.TemplateID, job.Info.TemplateName
	p.Measured = job.Info.Measured
	p.JobURL = JobOutputURL(s.cfg.AWXUIURL, jobID)
	p.Status, p.ReportedStatus = jobState(job.Info.Status), job.Info.Status
	if ended, sized := stateEnded(p.Status), sizingOf(job.Info) != (history.Sizing{}); ended || sized {
		// The whole job's end and memory peak (the at-cap mark),
		// whatever the window: the summary has them (cached per job).
		sum, err := s.store.Summary(c.Request().Context(), jobID)
		if err != nil {
			return err
		}
		if ended {
			p.End = sum.LastMs
		}
		if sized {
			p.Sizing = sizingEntry(sum)
		}
	}
	p.Pressure = graphpayload.Pressure(pressureInput(job), points)
	return c.JSON(http.StatusOK, p)
}

// pressureInput converts the job's stall columns of seconds stalled into
// the pressure band's input, in the store's column order.
func pressureInput(job *tsdb.Job) []graphpayload.StallColumn {
	var cols []graphpayload.StallColumn
	for _, c := range job.Columns {
		if sig, ok := history.StallShareSignal(c.Resource.Name); ok && c.Resource.Stall {
			cols = append(cols, graphpayload.StallColumn{Signal: sig, Ts: c.Ts, Vs: c.Vs})
		}
	}
	return cols
}

// tasks answers GET /api/v1/jobs/{job}/tasks: every task with exact
// statistics over the whole job.
func (s *Server) tasks(c echo.Context) error {
	jobID, err := jobParam(c)
	if err != nil {
		return err
	}
	release, err := s.reserveJobRead(c, jobID)
	if err != nil {
		return err
	}
	defer release()
	job, err := s.store.ReadJob(c.Request().Context(), jobID, math.MinInt64, math.MaxInt64)
	if err != nil {
		return err
	}
	cols, spans := graphInput(job)
	var last int64
	if job.LastEvent != nil {
		last = job.LastEvent.Counter
	}
	return c.JSON(http.StatusOK, graphpayload.TaskList{JobID: jobID, Tasks: graphpayload.Summaries(cols, spans, last), EventsURL: s.eventsURL(jobID), JobURL: JobOutputURL(s.cfg.AWXUIURL, jobID)})
}

// eventsURL fills {job_id} into the events template.
func (s *Server) eventsURL(jobID string) string {
	if s.cfg.EventsURL == "" {
		return ""
	}
	return strings.ReplaceAll(s.cfg.EventsURL, "{job_id}", url.PathEscape(jobID))
}

// graphInput converts a stored job into the payload's plain columns.
func graphInput(job *tsdb.Job) ([]graphpayload.Column, []graphpayload.TaskSpan) {
	cols := make([]graphpayload.Column, 0, len(job.Columns))
	for _, c := range job.Columns {
		if c.Resource.Stall {
			continue // no series of the graph: each task's Waited says it
		}
		cols = append(cols, graphpayload.Column{Resource: c.Resource.Name, Unit: c.Resource.Unit, Ts: c.Ts, Vs: c.Vs, Task: c.Task})
	}
	waited := jobWaited(job)
	spans := make([]graphpayload.TaskSpan, len(job.Tasks))
	for i, t := range job.Tasks {
		spans[i] = graphpayload.TaskSpan{Counter: t.Counter, UUID: t.UUID, Name: t.Name, StartMs: t.StartMs, EndMs: t.EndMs}
		if waited != nil {
			spans[i].Waited = waited[i]
		}
	}
	return cols, spans
}

// jobWaited returns each task's stall figures from the job's stall
// columns (see history.Waited), or nil for a job without any.
func jobWaited(job *tsdb.Job) []map[string]float64 {
	var cols []history.StallColumn
	for _, c := range job.Columns {
		if c.Resource.Stall {
			cols = append(cols, history.StallColumn{Resource: c.Resource.Name, Vs: c.Vs, Task: c.Task})
		}
	}
	if cols == nil {
		return nil
	}
	dur := make([]int64, len(job.Tasks))
	for i, t := range job.Tasks {
		dur[i] = t.EndMs - t.StartMs
	}
	return history.Waited(cols, dur)
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
