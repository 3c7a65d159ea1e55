// Package server is Peakline's HTTP face, on echo: the job graph, task and
// job APIs, JSON ingest, the collection policy, the Prometheus-compatible
// query API and remote write for Grafana and agents, health and
// self-metrics, and the web page routes. The gzip middleware compresses
// every answer, so handlers (and promhttp) must not compress their own.
// It decides request limits and maps errors to HTTP answers in one place
// (errors.go). It owns no storage or algorithms: jobs live in tsdb, points
// are chosen by downsample, pages come from web.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/peakline/peakline/tsdb"
)

// Config holds the server's settings. Zero values take the defaults.
type Config struct {
	// EventsURL is the job-events link template with the placeholders
	// {job_id}, {counter_gte} and {counter_lte}; empty for none.
	EventsURL string
	// AWXUIURL is the base URL of the AWX (or Tower) web UI, e.g.
	// https://awx.example; with it, payloads link each AWX job to its
	// output page (JobOutputURL). Empty for none.
	AWXUIURL string
	// MaxBodyBytes bounds a request body as sent (compressed or not).
	MaxBodyBytes int64
	// MaxDecodedBytes bounds a request body after decompression.
	MaxDecodedBytes int64
	// MaxBatchSamples bounds the samples of one ingest batch.
	MaxBatchSamples int
	// MaxBatchSeries bounds the series of one JSON ingest batch.
	MaxBatchSeries int
	// MaxBatchTasks bounds the tasks of one JSON ingest batch.
	MaxBatchTasks int
	// MaxConcurrentIngest bounds the ingest requests (JSON and remote
	// write) decoded at once; more are refused with 429 and Retry-After,
	// not queued. With MaxDecodedBytes it bounds the memory ingest holds.
	MaxConcurrentIngest int
	// BodyReadTimeout bounds the time an ingest body takes to arrive,
	// counted from the end of its headers; a slower one gets 408
	// (default DefaultBodyReadTimeout). Ingest slots are taken only once
	// a body is in (limit.go).
	BodyReadTimeout time.Duration
	// MaxBodyBytesInFlight bounds the bytes of the ingest bodies being
	// received and served at once, whatever the number of clients; a body
	// that would pass it gets 429 (default DefaultMaxBodyBytesInFlight).
	// It must be at least MaxBodyBytes.
	MaxBodyBytesInFlight int64
	// MaxReadBytes bounds the memory the heavy reads (history, a job's
	// graph and tasks, the jobs list) hold at once, by the estimate each
	// reserves before it starts; past it 429 with Retry-After (default
	// DefaultMaxReadBytes).
	MaxReadBytes int64
	// ShutdownTimeout bounds the wait for in-flight requests on shutdown.
	ShutdownTimeout time.Duration
	// SettingsPath is the file holding the collection policy; "" keeps
	// it in memory.
	SettingsPath string
	// Prometheus configures the Prometheus-compatible API (prometheus.go).
	Prometheus PromConfig
	// Security is the edge policy: auth, allowed hosts, limits (security.go).
	Security SecurityConfig
	// RegressionFactor is how many times a task's usual value (the median
	// of the other runs) a run's value must reach to be flagged by the
	// template history (history.Rule.Factor); 0 means
	// DefaultRegressionFactor. It must be at least 1.
	RegressionFactor float64
}

// Defaults of Config's limits (serve's flags), used for a zero field.
const (
	DefaultMaxBodyBytes    = 16 << 20
	DefaultMaxDecodedBytes = 64 << 20 // × DefaultMaxConcurrentIngest: 256 MiB of decoded bodies at most
	DefaultMaxBatchSamples = 2_000_000
	defaultShutdownTimeout = 30 * time.Second
)

const (
	DefaultMaxBatchSeries      = 10_000
	DefaultMaxBatchTasks       = 10_000
	DefaultMaxConcurrentIngest = 4
)

func (c *Config) setDefaults() {
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxDecodedBytes <= 0 {
		c.MaxDecodedBytes = DefaultMaxDecodedBytes
	}
	if c.MaxBatchSamples <= 0 {
		c.MaxBatchSamples = DefaultMaxBatchSamples
	}
	if c.MaxBatchSeries <= 0 {
		c.MaxBatchSeries = DefaultMaxBatchSeries
	}
	if c.MaxBatchTasks <= 0 {
		c.MaxBatchTasks = DefaultMaxBatchTasks
	}
	if c.MaxConcurrentIngest <= 0 {
		c.MaxConcurrentIngest = DefaultMaxConcurrentIngest
	}
	if c.BodyReadTimeout <= 0 {
		c.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if c.MaxBodyBytesInFlight <= 0 {
		c.MaxBodyBytesInFlight = max(DefaultMaxBodyBytesInFlight, c.MaxBodyBytes)
	}
	if c.MaxReadBytes <= 0 {
		c.MaxReadBytes = DefaultMaxReadBytes
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = defaultShutdownTimeout
	}
	if c.RegressionFactor == 0 {
		c.RegressionFactor = DefaultRegressionFactor
	}
}

// CheckEventsURL reports whether a job-events template is usable.
func CheckEventsURL(tmpl string) error {
	if tmpl == "" {
		return nil
	}
	if !strings.HasPrefix(tmpl, "http://") && !strings.HasPrefix(tmpl, "https://") && !strings.HasPrefix(tmpl, "/") {
		return fmt.Errorf("must be an http(s) URL or an absolute path, got %q", tmpl)
	}
	for _, p := range []string{"{counter_gte}", "{counter_lte}"} {
		if !strings.Contains(tmpl, p) {
			return fmt.Errorf("must contain the placeholder %s, got %q (e.g. https://awx.example/api/v2/jobs/{job_id}/job_events/?counter__gte={counter_gte}&counter__lte={counter_lte})", p, tmpl)
		}
	}
	return nil
}

// CheckAWXUIURL reports whether an AWX UI base URL is usable: an
// absolute http(s) URL with a host, and no query or fragment (the job
// output path goes after it).
func CheckAWXUIURL(base string) error {
	if base == "" {
		return nil
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || strings.Contains(base, "#") {
		return fmt.Errorf("must be the http(s) URL of the AWX web UI without a query or #fragment, e.g. https://awx.example, got %q", base)
	}
	return nil
}

// JobOutputURL is the AWX UI page of job jobID's output under the UI at
// base (see CheckAWXUIURL): base/#/jobs/playbook/ID/output. AWX job ids
// are whole numbers: any other id (an ansible-runner ident) is no AWX
// job, and gets "", as does an empty base.
func JobOutputURL(base, jobID string) string {
	if base == "" || jobID == "" || len(jobID) > 19 || strings.TrimLeft(jobID, "0123456789") != "" {
		return ""
	}
	return strings.TrimRight(base, "/") + "/#/jobs/playbook/" + jobID + "/output"
}

// Server serves one store.
type Server struct {
	cfg     Config
	store   *tsdb.Store
	logger  *slog.Logger
	echo    *echo.Echo
	metrics *metrics
	policy  *policy
	sec     *security
	ingests chan struct{} // one token per ingest request being served (limit.go)
	bodies  *bodyBudget   // bytes of the ingest bodies being received and served (limit.go)
	reads   *readPool     // memory of the heavy reads being served (limit.go)
	runs    *runCache     // per-job statistics of the template history (history.go)
	owned   bool          // the store was opened by Open: Close closes it (open.go)
	docs    writeBuffers  // JSON ingest bodies, reused (ingest.go)
}

// New builds a server over store. reg receives the server's own metrics
// and is served on /metrics; it may be nil.
func New(cfg Config, store *tsdb.Store, logger *slog.Logger, reg *prometheus.Registry) (*Server, error) {
	cfg.setDefaults()
	if err := CheckEventsURL(cfg.EventsURL); err != nil {
		return nil, fmt.Errorf("events URL: %w", err)
	}
	if err := CheckAWXUIURL(cfg.AWXUIURL); err != nil {
		return nil, fmt.Errorf("AWX UI URL: %w", err)
	}
	if cfg.RegressionFactor < 1 || math.IsInf(cfg.RegressionFactor, 0) || math.IsNaN(cfg.RegressionFactor) {
		return nil, fmt.Errorf("regression factor: must be a number >= 1, got %v", cfg.RegressionFactor)
	}
	if cfg.MaxBodyBytesInFlight < cfg.MaxBodyBytes {
		return nil, fmt.Errorf("max body bytes in flight: must be at least the max body bytes, %d (serve --max-body-bytes-in-flight, --max-body-bytes), got %d", cfg.MaxBodyBytes, cfg.MaxBodyBytesInFlight)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	if cfg.Prometheus.Registerer == nil {
		cfg.Prometheus.Registerer = reg
	}
	pol, err := loadPolicy(cfg.SettingsPath)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, store: store, logger: logger, metrics: newMetrics(reg), policy: pol}
	s.ingests = make(chan struct{}, cfg.MaxConcurrentIngest)
	s.bodies = newBodyBudget(cfg.MaxBodyBytesInFlight)
	s.reads = newReadPool(cfg.MaxReadBytes)
	s.runs = newRunCache()
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleError
	e.Use(middleware.Recover())
	e.Use(s.metrics.middleware)
	if err := reg.Register(newTemplateMetrics(s, time.Now)); err != nil {
		return nil, fmt.Errorf("register template metrics: %w", err)
	}
	s.useSecurity(e, reg)
	e.Use(middleware.GzipWithConfig(middleware.GzipConfig{MinLength: 1024}))
	e.Use(middleware.BodyLimit(fmt.Sprintf("%dB", cfg.MaxBodyBytes)))
	e.Use(s.limitIngest)

	e.GET("/healthz", s.healthz)
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, DisableCompression: true})))
	api := e.Group("/api/v1")
	api.GET("/jobs", s.listJobs)
	api.GET("/jobs/:job/graph", s.graph)
	api.GET("/jobs/:job/tasks", s.tasks)
	api.DELETE("/jobs/:job", s.deleteJob)
	api.POST("/ingest", s.ingest)
	api.GET("/settings", s.getSettings)
	api.PUT("/settings", s.putSettings)
	api.GET("/templates/:id", s.getTemplate)
	api.PUT("/templates/:id", s.putTemplate)
	api.GET("/templates/:id/history", s.templateHistory)
	api.GET("/templates/:id/rightsize", s.templateRightsize)
	if err := s.registerPrometheus(e); err != nil {
		return nil, err
	}
	s.registerWeb(e)
	s.echo = e
	return s, nil
}

// Handler returns the HTTP handler, for tests and embedding.
func (s *Server) Handler() http.Handler { return s.echo }

// Serve answers on ln until ctx is done, then stops taking connections
// and waits for in-flight requests (so every acknowledged batch is in the
// write-ahead log) before returning.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.echo,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute,
		WriteTimeout:      2 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	s.logger.Info("shutting down", "timeout", s.cfg.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shut down: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// healthz answers {"status":"ok"}, or {"status":"degraded", ...} with
// the reasons: "quarantined":[...] while damaged blocks sit in
// DATA/quarantine, "writes":{...} while the store refuses writes (its
// disk below --min-free-disk, or a failed write-ahead log write; both
// end by themselves once space is freed, the second by the store
// reopening itself at a write). Both
// are HTTP 200: a degraded store still serves every other job and every
// read, and a liveness probe that failed would restart it into the same
// state (and take the healthy jobs down with it); the damage needs a
// person, who is told by this body, the log and the metrics
// (peakline_quarantined_blocks, peakline_disk_refused_writes_total).
func (s *Server) healthz(c echo.Context) error {
	body := healthBody{Status: "ok", Quarantined: s.store.Damage().Quarantined}
	if ws := s.store.WriteStatus(); ws.Refusing {
		body.Writes = &writesHealth{Refused: true, Reason: ws.Reason, FreeBytes: ws.FreeBytes, MinFreeBytes: ws.MinFreeBytes}
	}
	if len(body.Quarantined) > 0 || body.Writes != nil {
		body.Status = "degraded"
	}
	return c.JSON(http.StatusOK, body)
}

// healthBody is the /healthz answer.
type healthBody struct {
	Status      string                  `json:"status"`
	Quarantined []tsdb.QuarantinedBlock `json:"quarantined,omitempty"`
	Writes      *writesHealth           `json:"writes,omitempty"`
}

// writesHealth says why writes are refused.
type writesHealth struct {
	Refused      bool   `json:"refused"`
	Reason       string `json:"reason"`
	FreeBytes    int64  `json:"free_bytes"`
	MinFreeBytes int64  `json:"min_free_bytes"`
}
