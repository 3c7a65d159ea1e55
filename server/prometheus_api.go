package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"

	"github.com/peakline/peakline/tsdb/query"
)

// maxPointsPerSeries bounds (end-start)/step of a range query, as in
// Prometheus: a minute's resolution for a week, an hour's for a year.
const maxPointsPerSeries = query.MaxPointsPerSeries

// The default start and end of metadata lookups, as in Prometheus
// (web/api/v1: MinTime, MaxTime), so that their RFC 3339 forms, which
// clients send back, parse.
var (
	promMinTime = time.Unix(math.MinInt64/1000+62135596801, 0).UTC()
	promMaxTime = time.Unix(math.MaxInt64/1000-62135596801, 999999999).UTC()

	promMinTimeText = promMinTime.Format(time.RFC3339Nano)
	promMaxTimeText = promMaxTime.Format(time.RFC3339Nano)
)

// form parses the query string and a form body (Grafana POSTs queries)
// and returns the request.
func form(c echo.Context) (*http.Request, error) {
	r := c.Request()
	if err := r.ParseForm(); err != nil {
		var he *echo.HTTPError
		if errors.As(err, &he) {
			return nil, promErr(he)
		}
		return nil, promBadRequest(fmt.Errorf("parse form values: %w", err))
	}
	return r, nil
}

// query answers /query: an instant query.
func (a *promAPI) query(c echo.Context) error {
	r, err := form(c)
	if err != nil {
		return err
	}
	ts, err := timeParam(r, "time", a.cfg.Now())
	if err != nil {
		return err
	}
	limit, err := limitParam(r)
	if err != nil {
		return err
	}
	ctx, cancel, err := timeoutContext(r)
	if err != nil {
		return err
	}
	defer cancel()
	res, err := a.engine.Instant(ctx, r.FormValue("query"), ts)
	if err != nil {
		return queryErr(err)
	}
	defer res.Close()
	return a.writeResult(c, res, limit)
}

// queryRange answers /query_range.
func (a *promAPI) queryRange(c echo.Context) error {
	r, err := form(c)
	if err != nil {
		return err
	}
	start, err := parseTime(r.FormValue("start"))
	if err != nil {
		return promBadData("start", err)
	}
	end, err := parseTime(r.FormValue("end"))
	if err != nil {
		return promBadData("end", err)
	}
	if end.Before(start) {
		return promBadData("end", errors.New("end timestamp must not be before start time"))
	}
	step, err := parseDuration(r.FormValue("step"))
	if err != nil {
		return promBadData("step", err)
	}
	if step <= 0 {
		return promBadData("step", errors.New("zero or negative query resolution step widths are not accepted. Try a positive integer"))
	}
	if end.Sub(start)/step > maxPointsPerSeries {
		return promBadRequest(errors.New("exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)"))
	}
	limit, err := limitParam(r)
	if err != nil {
		return err
	}
	ctx, cancel, err := timeoutContext(r)
	if err != nil {
		return err
	}
	defer cancel()
	res, err := a.engine.Range(ctx, r.FormValue("query"), start, end, step)
	if err != nil {
		return queryErr(err)
	}
	defer res.Close()
	return a.writeResult(c, res, limit)
}

// queryErr classifies an error of evaluating the query parameter: the
// query's own faults (parse errors, limits) name the parameter, as
// Prometheus does.
func queryErr(err error) error {
	var qe *query.Error
	if errors.As(err, &qe) && qe.Type == query.ErrBadData {
		return promBadData("query", err)
	}
	return promErr(err)
}

// writeResult answers a query result, cut to limit series (0 for all).
func (a *promAPI) writeResult(c echo.Context, res *query.Result, limit int) error {
	v, warnings := res.Value, res.Warnings
	if limit > 0 {
		switch m := v.(type) {
		case promql.Matrix:
			if len(m) > limit {
				v, warnings = m[:limit], append(warnings, "results truncated due to limit")
			}
		case promql.Vector:
			if len(m) > limit {
				v, warnings = m[:limit], append(warnings, "results truncated due to limit")
			}
		}
	}
	buf := make([]byte, 0, 4096)
	buf = append(buf, `{"status":"success","data":`...)
	buf, err := appendQueryData(buf, v)
	if err != nil {
		return promErr(err)
	}
	buf = appendWarnings(buf, warnings, res.Infos)
	buf = append(buf, '}')
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, buf)
}

// lookupParams reads start, end, match[] and limit of a metadata lookup.
func lookupParams(r *http.Request) (query.Lookup, error) {
	var l query.Lookup
	var err error
	if l.Start, err = timeParam(r, "start", promMinTime); err != nil {
		return l, err
	}
	if l.End, err = timeParam(r, "end", promMaxTime); err != nil {
		return l, err
	}
	if l.Matchers, err = query.ParseSelectors(r.Form["match[]"]); err != nil {
		return l, promBadData("match[]", err)
	}
	if l.Limit, err = limitParam(r); err != nil {
		return l, err
	}
	return l, nil
}

// labelNames answers /labels.
func (a *promAPI) labelNames(c echo.Context) error {
	r, err := form(c)
	if err != nil {
		return err
	}
	l, err := lookupParams(r)
	if err != nil {
		return err
	}
	names, warnings, err := a.engine.LabelNames(r.Context(), l)
	if err != nil {
		return promErr(err)
	}
	return c.JSON(http.StatusOK, promSuccess{Status: "success", Data: names, Warnings: warnings})
}

// labelValues answers /label/{name}/values; the name may be in the
// U__ escaping Prometheus uses for names that are not plain identifiers.
func (a *promAPI) labelValues(c echo.Context) error {
	r, err := form(c)
	if err != nil {
		return err
	}
	name, err := pathParam(c, "name")
	if err != nil {
		return promBadRequest(fmt.Errorf("invalid label name: %v", err))
	}
	if strings.HasPrefix(name, "U__") {
		name = model.UnescapeName(name, model.ValueEncodingEscaping)
	}
	if !model.UTF8Validation.IsValidLabelName(name) {
		return promBadRequest(fmt.Errorf("invalid label name: %q", name))
	}
	l, err := lookupParams(r)
	if err != nil {
		return err
	}
	vals, warnings, err := a.engine.LabelValues(r.Context(), name, l)
	if err != nil {
		return promErr(err)
	}
	return c.JSON(http.StatusOK, promSuccess{Status: "success", Data: vals, Warnings: warnings})
}

// series answers /series.
func (a *promAPI) series(c echo.Context) error {
	r, err := form(c)
	if err != nil {
		return err
	}
	if len(r.Form["match[]"]) == 0 {
		return promBadRequest(errors.New("no match[] parameter provided"))
	}
	l, err := lookupParams(r)
	if err != nil {
		return err
	}
	sets, warnings, err := a.engine.Series(r.Context(), l)
	if err != nil {
		return promErr(err)
	}
	if sets == nil {
		sets = []labels.Labels{}
	}
	return c.JSON(http.StatusOK, promSuccess{Status: "success", Data: sets, Warnings: warnings})
}

// metadata answers /metadata.
func (a *promAPI) metadata(c echo.Context) error {
	r, err := form(c)
	if err != nil {
		return err
	}
	limit := -1
	if s := r.FormValue("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil {
			return promBadRequest(errors.New("limit must be a number"))
		}
	}
	if s := r.FormValue("limit_per_metric"); s != "" {
		// Each family has one entry here, so any limit keeps it.
		if _, err := strconv.Atoi(s); err != nil {
			return promBadRequest(errors.New("limit_per_metric must be a number"))
		}
	}
	return c.JSON(http.StatusOK, promSuccess{Status: "success", Data: a.meta.list(r.FormValue("metric"), limit)})
}

// buildInfo answers /status/buildinfo.
func (a *promAPI) buildInfo(c echo.Context) error {
	return c.JSON(http.StatusOK, promSuccess{Status: "success", Data: a.buildInfoData()})
}

// exemplars answers /query_exemplars: the store keeps none.
func (a *promAPI) exemplars(c echo.Context) error {
	return c.JSON(http.StatusOK, promSuccess{Status: "success", Data: []struct{}{}})
}

// rules answers /rules: Peakline evaluates no rules.
func (a *promAPI) rules(c echo.Context) error {
	return c.JSON(http.StatusOK, promSuccess{Status: "success", Data: map[string][]struct{}{"groups": {}}})
}

// alerts answers /alerts: Peakline raises no alerts.
func (a *promAPI) alerts(c echo.Context) error {
	return c.JSON(http.StatusOK, promSuccess{Status: "success", Data: map[string][]struct{}{"alerts": {}}})
}

// formatQuery answers /format_query with the query prettified by MetricsQL,
// within the bounds of a query (see query.Engine.Format).
func (a *promAPI) formatQuery(c echo.Context) error {
	r, err := form(c)
	if err != nil {
		return err
	}
	out, err := a.engine.Format(r.Context(), r.FormValue("query"))
	if err != nil {
		return queryErr(err)
	}
	return c.JSON(http.StatusOK, promSuccess{Status: "success", Data: out})
}

// timeParam parses an optional time parameter.
func timeParam(r *http.Request, name string, def time.Time) (time.Time, error) {
	v := r.FormValue(name)
	if v == "" {
		return def, nil
	}
	t, err := parseTime(v)
	if err != nil {
		return time.Time{}, promBadData(name, err)
	}
	return t, nil
}

// parseTime reads unix seconds (with a fraction) or RFC 3339, as
// Prometheus does.
func parseTime(s string) (time.Time, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		sec, frac := math.Modf(f)
		frac = math.Round(frac*1000) / 1000
		return time.Unix(int64(sec), int64(frac*float64(time.Second))).UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	// time.Parse handles 4-digit years only; the lookup bounds have more.
	switch s {
	case promMinTimeText:
		return promMinTime, nil
	case promMaxTimeText:
		return promMaxTime, nil
	}
	return time.Time{}, fmt.Errorf("cannot parse %q to a valid timestamp", s)
}

// parseDuration reads seconds (with a fraction) or a Prometheus duration
// such as 1m30s.
func parseDuration(s string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		ns := f * float64(time.Second)
		if math.IsNaN(ns) || ns >= float64(math.MaxInt64) || ns < float64(math.MinInt64) {
			return 0, fmt.Errorf("cannot parse %q to a valid duration. It overflows int64", s)
		}
		return time.Duration(ns), nil
	}
	if d, err := model.ParseDuration(s); err == nil {
		return time.Duration(d), nil
	}
	return 0, fmt.Errorf("cannot parse %q to a valid duration", s)
}

// limitParam reads the optional limit on returned series or items.
func limitParam(r *http.Request) (int, error) {
	s := r.FormValue("limit")
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, promBadData("limit", err)
	}
	if n < 0 {
		return 0, promBadData("limit", errors.New("limit must be non-negative"))
	}
	return n, nil
}

// timeoutContext applies the optional timeout parameter; the engine's
// own timeout applies too.
func timeoutContext(r *http.Request) (context.Context, context.CancelFunc, error) {
	s := r.FormValue("timeout")
	if s == "" {
		ctx, cancel := context.WithCancel(r.Context())
		return ctx, cancel, nil
	}
	d, err := parseDuration(s)
	if err != nil {
		return nil, nil, promBadData("timeout", err)
	}
	if d <= 0 {
		return nil, nil, promBadData("timeout", fmt.Errorf("timeout must be positive, got %s", d))
	}
	ctx, cancel := context.WithTimeout(r.Context(), d)
	return ctx, cancel, nil
}
