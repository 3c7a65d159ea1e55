package server

import (
	"errors"
	"fmt"

	"github.com/labstack/echo/v4"
)

// errBusy marks a request refused because the server already serves as
// many of its kind as it allows; the client should retry later.
var errBusy = errors.New("too many requests")

// ingestRetryAfter is the Retry-After, in seconds, of a refused ingest
// request: about the time one batch takes to decode and append.
const ingestRetryAfter = "1"

// ingestRoutes are the routes whose requests decode a body into memory.
var ingestRoutes = map[string]bool{
	"/api/v1/ingest":           true,
	"/api/v1/write":            true,
	"/prometheus/api/v1/write": true,
}

// limitIngest lets at most Config.MaxConcurrentIngest ingest requests
// (JSON and remote write) in at once. One more is refused at once with
// 429 and Retry-After rather than queued: a queued request would already
// hold its connection and body, which is the memory the limit bounds.
func (s *Server) limitIngest(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !ingestRoutes[c.Path()] {
			return next(c)
		}
		select {
		case s.ingests <- struct{}{}:
		default:
			c.Response().Header().Set(echo.HeaderRetryAfter, ingestRetryAfter)
			return fmt.Errorf("%w: %d ingest requests are being served, at most %d at once (serve --max-concurrent-ingest); retry after %s s",
				errBusy, cap(s.ingests), cap(s.ingests), ingestRetryAfter)
		}
		defer func() { <-s.ingests }()
		return next(c)
	}
}
