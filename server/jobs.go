package server

import (
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"
)

// jobEntry is one job in GET /api/v1/jobs.
type jobEntry struct {
	JobID   string                  `json:"job_id"`
	First   int64                   `json:"first"`
	Last    int64                   `json:"last"`
	Tasks   int                     `json:"tasks"`
	Samples map[string]int          `json:"samples"`
	Peaks   map[string]resourcePeak `json:"peaks"`
}

type resourcePeak struct {
	T int64   `json:"t"`
	V float64 `json:"v"`
}

// listJobs answers GET /api/v1/jobs, newest first.
func (s *Server) listJobs(c echo.Context) error {
	sums, err := s.store.Summaries(c.Request().Context())
	if err != nil {
		return err
	}
	out := make([]jobEntry, 0, len(sums))
	for _, sum := range sums {
		e := jobEntry{JobID: sum.ID, First: sum.FirstMs, Last: sum.LastMs, Tasks: sum.Tasks,
			Samples: map[string]int{}, Peaks: map[string]resourcePeak{}}
		for _, r := range sum.Resources {
			e.Samples[r.Resource.Name] = r.Samples
			if r.Samples > 0 {
				e.Peaks[r.Resource.Name] = resourcePeak{T: r.PeakMs, V: r.Peak}
			}
		}
		out = append(out, e)
	}
	slices.SortStableFunc(out, func(a, b jobEntry) int {
		switch {
		case a.First > b.First:
			return -1
		case a.First < b.First:
			return 1
		}
		return 0
	})
	return c.JSON(http.StatusOK, map[string]any{"jobs": out})
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
