package server

import (
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// metrics are the server's own Prometheus metrics.
type metrics struct {
	requests        *prometheus.HistogramVec
	ingestedSamples prometheus.Counter
	ingestedDups    prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	// peakline_build_info{version,revision,branch,goversion,...} 1
	reg.MustRegister(versioncollector.NewCollector("peakline"))
	return &metrics{
		requests: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "peakline_http_request_duration_seconds",
			Help:    "Duration of HTTP requests by route and status code.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"route", "code"}),
		ingestedSamples: f.NewCounter(prometheus.CounterOpts{
			Name: "peakline_ingested_samples_total",
			Help: "Samples stored through the ingest endpoints.",
		}),
		ingestedDups: f.NewCounter(prometheus.CounterOpts{
			Name: "peakline_ingested_duplicate_samples_total",
			Help: "Samples received again and skipped because they were already stored.",
		}),
	}
}

func (m *metrics) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		code := c.Response().Status
		if err != nil {
			code = statusOf(err)
		}
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		m.requests.WithLabelValues(route, strconv.Itoa(code)).Observe(time.Since(start).Seconds())
		return err
	}
}
