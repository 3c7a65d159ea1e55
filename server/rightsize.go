package server

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/peakline/peakline/server/graphpayload"
	"github.com/peakline/peakline/tsdb"
	"github.com/peakline/peakline/tsdb/history"
)

// maxLimitParam bounds ?limit= of the right-sizing: 1 PiB.
const maxLimitParam = 1 << 50

// templateRightsize answers GET /api/v1/templates/{id}/rightsize?last=N[&limit=BYTES]:
// what the template's last N runs (default 20, at most 100) say its
// container group should request, and how many forks fit in the
// recommended memory or in limit (bytes, or with a Ki, Mi, Gi suffix).
// See history.Rightsize. The runs are read as the history reads them,
// within the heavy-read pool.
func (s *Server) templateRightsize(c echo.Context) error {
	id, err := templateParam(c)
	if err != nil {
		return err
	}
	last, err := historyLast(c.QueryParam("last"))
	if err != nil {
		return err
	}
	var opts history.SizeOptions
	if v := c.QueryParam("limit"); v != "" {
		b, err := parseBytes(v)
		if err != nil || b < 1 || b > maxLimitParam {
			return badRequest("limit: must be a memory size in bytes from 1 to 1Pi (a Ki, Mi or Gi suffix allowed), got %q", v)
		}
		opts.LimitBytes = float64(b)
	}
	runs, _, _, release, err := s.templateRuns(c, id, last, "")
	if err != nil {
		return err
	}
	defer release()
	return c.JSON(http.StatusOK, history.Rightsize(id, runs, opts))
}

// parseBytes reads a byte count with an optional binary suffix (Ki, Mi,
// Gi, Ti), as Kubernetes quantities write them.
func parseBytes(v string) (int64, error) {
	shift := 0
	for i, suf := range []string{"Ki", "Mi", "Gi", "Ti"} {
		if len(v) > 2 && v[len(v)-2:] == suf {
			v, shift = v[:len(v)-2], 10*(i+1)
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > maxLimitParam>>shift {
		return 0, strconv.ErrRange
	}
	return n << shift, nil
}

// sizingOf reads what a job's info says of its sizing; a field that is
// not a number is unknown (the store refuses such writes, so only data
// of older writers lacks them).
func sizingOf(info tsdb.JobInfo) history.Sizing {
	num := func(v string) int64 {
		n, _ := strconv.ParseInt(v, 10, 64)
		return max(n, 0)
	}
	return history.Sizing{
		Forks: int(num(info.Forks)), Hosts: int(num(info.Hosts)),
		MemoryLimitBytes: float64(num(info.MemoryLimit)),
		OOMKills:         int(num(info.OOMKills)), OOMCounter: num(info.OOMCounter),
		ProjectRevision: info.ProjectRevision, EEImage: info.EEImage,
	}
}

// sizingEntry is the sizing of a job as the graph payload and the jobs
// list show it, from its info and its summary's memory peak; nil when
// the info says none of it.
func sizingEntry(sum tsdb.Summary) *graphpayload.Sizing {
	z := sizingOf(sum.Info)
	if z == (history.Sizing{}) {
		return nil
	}
	e := &graphpayload.Sizing{Forks: z.Forks, Hosts: z.Hosts, MemoryLimitBytes: int64(z.MemoryLimitBytes),
		OOMKills: z.OOMKills, OOMCounter: z.OOMCounter, ProjectRevision: z.ProjectRevision, EEImage: z.EEImage}
	for _, r := range sum.Resources {
		if r.Resource.Name == "memory" && r.Samples > 0 {
			e.PeakBytes = int64(r.Peak)
		}
	}
	e.AtCap = z.OOMKills == 0 && z.MemoryLimitBytes > 0 && float64(e.PeakBytes) >= history.AtCapShare*z.MemoryLimitBytes
	return e
}
