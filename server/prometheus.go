package server

import (
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/common/version"

	"github.com/peakline/peakline/tsdb"
	"github.com/peakline/peakline/tsdb/query"
)

// The Prometheus-compatible API: what Grafana's Prometheus data source
// calls under http://HOST:PORT/prometheus (query, query_range, labels,
// label values, series, metadata, buildinfo, exemplars, rules), and
// Prometheus remote write 1.0 in (remotewrite.go). Queries are MetricsQL,
// evaluated by the Prometheus engine (package tsdb/query). Answers and
// errors use the Prometheus JSON envelope, not Peakline's.

// PromConfig configures the Prometheus-compatible API. Zero values take
// the defaults.
type PromConfig struct {
	// QueryTimeout bounds the evaluation of one query (default 2m).
	QueryTimeout time.Duration
	// QueryMaxSamples bounds the samples one query may hold in memory at
	// once (default 50,000,000, as in Prometheus).
	QueryMaxSamples int
	// QueryMaxConcurrency bounds the queries evaluated at once; more wait
	// for a slot (default 8).
	QueryMaxConcurrency int
	// QueryMaxPoints bounds the steps the subqueries of one query
	// evaluate together, checked before evaluation (default
	// query.DefaultMaxPoints).
	QueryMaxPoints int
	// QueryMaxLength bounds the query text in bytes (default
	// query.DefaultMaxQueryLength).
	QueryMaxLength int
	// LookbackDelta is how far back an instant selector looks for a
	// sample (default 5m, as in Prometheus).
	LookbackDelta time.Duration
	// RollupWindow is the window of a MetricsQL rollup written without
	// one (`rate(x)`) in an instant query; range queries use their step
	// (default 5m).
	RollupWindow time.Duration

	// Registerer receives the query engine's and remote write's metrics;
	// nil registers none. Wiring, not a flag: pass the registry given to
	// New (one server per registry: a second registration panics).
	Registerer prometheus.Registerer
	// Now is the clock (default time.Now): the default query time and the
	// remote-write limit on future samples come from it.
	Now func() time.Time
}

func (c *PromConfig) setDefaults() {
	if c.QueryTimeout <= 0 {
		c.QueryTimeout = query.DefaultTimeout
	}
	if c.QueryMaxSamples <= 0 {
		c.QueryMaxSamples = query.DefaultMaxSamples
	}
	if c.QueryMaxConcurrency <= 0 {
		c.QueryMaxConcurrency = query.DefaultMaxConcurrency
	}
	if c.QueryMaxPoints <= 0 {
		c.QueryMaxPoints = query.DefaultMaxPoints
	}
	if c.QueryMaxLength <= 0 {
		c.QueryMaxLength = query.DefaultMaxQueryLength
	}
	if c.LookbackDelta <= 0 {
		c.LookbackDelta = query.DefaultLookbackDelta
	}
	if c.RollupWindow <= 0 {
		c.RollupWindow = query.DefaultRollupWindow
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// promAPI serves the Prometheus-compatible routes of one server.
type promAPI struct {
	s       *Server
	cfg     PromConfig
	engine  *query.Engine
	meta    *metadataStore
	rw      *remoteWriteMetrics
	bufs    writeBuffers // remote write's request memory (remotewrite_decode.go)
	version string       // the Prometheus version whose engine answers
}

// registerPrometheus adds the Prometheus-compatible API under /prometheus
// and remote write at /prometheus/api/v1/write and /api/v1/write.
func (s *Server) registerPrometheus(e *echo.Echo) error {
	s.cfg.Prometheus.setDefaults()
	cfg := s.cfg.Prometheus
	a := &promAPI{
		s:   s,
		cfg: cfg,
		engine: query.New(s.store.Queryable(), query.Options{
			Timeout:        cfg.QueryTimeout,
			MaxSamples:     cfg.QueryMaxSamples,
			MaxConcurrency: cfg.QueryMaxConcurrency,
			MaxPoints:      cfg.QueryMaxPoints,
			MaxQueryLength: cfg.QueryMaxLength,
			LookbackDelta:  cfg.LookbackDelta,
			DefaultWindow:  cfg.RollupWindow,
			Logger:         s.logger,
			Registerer:     cfg.Registerer,
		}),
		meta:    newMetadataStore(),
		rw:      newRemoteWriteMetrics(cfg.Registerer),
		version: prometheusVersion(),
	}
	g := e.Group("/prometheus/api/v1")
	getPost := func(path string, h echo.HandlerFunc) {
		g.GET(path, h)
		g.POST(path, h)
	}
	getPost("/query", a.query)
	getPost("/query_range", a.queryRange)
	getPost("/labels", a.labelNames)
	getPost("/label/:name/values", a.labelValues)
	getPost("/series", a.series)
	g.GET("/metadata", a.metadata)
	g.GET("/status/buildinfo", a.buildInfo)
	getPost("/query_exemplars", a.exemplars)
	g.GET("/rules", a.rules)
	g.GET("/alerts", a.alerts)
	getPost("/format_query", a.formatQuery)
	g.POST("/write", a.remoteWrite)
	e.POST("/api/v1/write", a.remoteWrite)
	return nil
}

// prometheusVersion is the Prometheus release of the linked engine: the
// Go module v0.X.Y is release 3.(X-300).Y. Grafana reads features off it.
func prometheusVersion() string {
	const fallback = "3.0.0"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return fallback
	}
	for _, d := range bi.Deps {
		if d.Path != "github.com/prometheus/prometheus" {
			continue
		}
		var minor, patch int
		if _, err := fmt.Sscanf(d.Version, "v0.%d.%d", &minor, &patch); err != nil || minor < 300 {
			return fallback
		}
		return fmt.Sprintf("%d.%d.%d", minor/100, minor%100, patch)
	}
	return fallback
}

// buildInfoData answers status/buildinfo. It has no "features" member:
// Grafana takes an answer without one for Prometheus, and one with it
// (even empty) for Mimir or Cortex.
type buildInfoData struct {
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	Branch    string `json:"branch"`
	BuildUser string `json:"buildUser"`
	BuildDate string `json:"buildDate"`
	GoVersion string `json:"goVersion"`
}

// buildInfoData answers with Peakline's own build (revision, branch, build
// user and date, from the version package the release build sets) under the
// Prometheus version of the linked engine: Grafana picks the query features
// it offers by that version, and a Peakline release number would read to it
// as an ancient Prometheus.
func (a *promAPI) buildInfoData() buildInfoData {
	return buildInfoData{
		Version:   a.version,
		Revision:  version.GetRevision(),
		Branch:    version.Branch,
		BuildUser: version.BuildUser,
		BuildDate: version.BuildDate,
		GoVersion: version.GoVersion,
	}
}

// metadataEntry is one metric family's metadata in the metadata answer.
type metadataEntry struct {
	Type string `json:"type"`
	Help string `json:"help"`
	Unit string `json:"unit"`
}

// maxMetadataFamilies bounds the remote-written metadata kept in memory.
const maxMetadataFamilies = 10_000

// metadataStore holds metric metadata: the Peakline schema's, and what
// remote-write senders declared (in memory only, like a Prometheus
// server's scrape metadata). Safe for concurrent use.
type metadataStore struct {
	mu sync.Mutex
	m  map[string]metadataEntry
}

func newMetadataStore() *metadataStore {
	m := map[string]metadataEntry{
		tsdb.MetricTaskStart: {Type: "gauge", Help: "One sample at the start of each Ansible task; the value is the counter of its playbook_on_task_start event."},
		tsdb.MetricLastEvent: {Type: "gauge", Help: "The newest job event seen of an Ansible job, at its created time; the value is its counter."},
	}
	for _, r := range tsdb.Resources {
		help := map[string]string{
			"cpu":    "CPU use of the processes of an Ansible task, in percent of one CPU (may exceed 100).",
			"memory": "Memory use of the processes of an Ansible task, in bytes.",
			"pids":   "Number of processes of an Ansible task.",

			"cpu_stall":      "Seconds some process of an Ansible task waited for a CPU during the collector's interval ending at the sample.",
			"memory_stall":   "Seconds some process of an Ansible task waited on memory during the collector's interval ending at the sample.",
			"cpu_throttled":  "Seconds the CPU limit of an Ansible job held it back during the collector's interval ending at the sample.",
			"node_cpu_stall": "Seconds some process on the job's node waited for a CPU during the collector's interval ending at the sample.",
			"node_load":      "The 1-minute load average of the job's node per CPU at the sample (nodes without pressure stall information).",
		}[r.Name]
		unit := r.Unit
		if unit == "count" {
			unit = ""
		}
		m[r.Metric] = metadataEntry{Type: "gauge", Help: help, Unit: unit}
	}
	return &metadataStore{m: m}
}

// put records the metadata of a family, unless the store is full.
func (s *metadataStore) put(family string, e metadataEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[family]; !ok && len(s.m) >= maxMetadataFamilies {
		return
	}
	s.m[family] = e
}

// list returns the metadata of one family (all when metric is empty), at
// most limit families (all when limit < 0).
func (s *metadataStore) list(metric string, limit int) map[string][]metadataEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]metadataEntry{}
	for name, e := range s.m {
		if metric != "" && name != metric {
			continue
		}
		if limit >= 0 && len(out) >= limit {
			break
		}
		out[name] = []metadataEntry{e}
	}
	return out
}

// remoteWriteMetrics count what remote write stored and refused.
type remoteWriteMetrics struct {
	samples  prometheus.Counter
	rejected *prometheus.CounterVec
}

func newRemoteWriteMetrics(reg prometheus.Registerer) *remoteWriteMetrics {
	f := promauto.With(reg)
	return &remoteWriteMetrics{
		samples: f.NewCounter(prometheus.CounterOpts{
			Name: "peakline_remote_write_samples_total",
			Help: "Samples (and histogram samples) stored through Prometheus remote write.",
		}),
		rejected: f.NewCounterVec(prometheus.CounterOpts{
			Name: "peakline_remote_write_rejected_samples_total",
			Help: "Remote-write samples refused, by reason.",
		}, []string{"reason"}),
	}
}
