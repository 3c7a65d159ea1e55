// Package remote reaches a Prometheus-compatible time-series engine
// (VictoriaMetrics single-node or cluster, Prometheus, Grafana Mimir,
// Thanos) over HTTP: it writes by Prometheus remote write 1.0 (snappy
// protobuf) and reads back through the engine's Prometheus HTTP API as a
// storage.Queryable, so code written against the Prometheus storage
// interfaces runs unchanged over the engine.
//
// It knows nothing of Peakline's schema (that is the tsdb package's) and
// keeps no state of its own beyond what it learned of the engine (whether
// it answers VictoriaMetrics' /api/v1/export): every replica of a server
// that reads through a Client sees what the engine holds.
//
// Answers are decoded as they arrive (jsonstream.go, decode.go), straight
// into columns, within a per-answer size limit and a memory budget shared
// by all reads of the client (budget.go); a read the engine fails, or
// that asks too much, gets a sentinel error saying which.
//
// A Client is safe for concurrent use.
package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
)

// Errors a caller tells apart with errors.Is.
var (
	// ErrRejected marks a write or query the engine refused as invalid
	// (a 4xx other than 408 and 429): sending it again will not help.
	ErrRejected = errors.New("refused by the engine")
	// ErrUnavailable marks an engine that could not be reached or kept
	// answering 5xx, 408 or 429 through every retry (a write), or that
	// answered a read 503 or 429 (busy: try later).
	ErrUnavailable = errors.New("engine unavailable")
	// ErrFailed marks a read the engine answered with a 5xx other than
	// 503 and 504, or with an answer that is not the Prometheus API's.
	ErrFailed = errors.New("engine failed")
	// ErrTimeout marks a read the engine did not answer within
	// Config.RequestTimeout, or answered 504 or 408.
	ErrTimeout = errors.New("engine timed out")
	// ErrTooLarge marks a read whose answer passed Config.MaxResponseBytes,
	// or whose samples and labels alone passed Config.MemoryBudget: the
	// engine did nothing wrong, the read asked for too much.
	ErrTooLarge = errors.New("engine answer too large")
	// ErrBudget marks a read refused because other reads hold the memory
	// budget (Config.MemoryBudget): the same read may pass later.
	ErrBudget = errors.New("remote memory budget exhausted")
	// ErrDeleteUnsupported is returned by Delete for an engine without a
	// delete API (Mimir, Thanos) or with it switched off (Prometheus
	// without --web.enable-admin-api).
	ErrDeleteUnsupported = errors.New("the engine has no series delete API")
	// ErrBadWriteURL and ErrBadQueryURL mark New's refusal of
	// Config.WriteURL and Config.QueryURL.
	ErrBadWriteURL = errors.New("write URL")
	ErrBadQueryURL = errors.New("query URL")
)

// Config says where the engine is and how patiently to talk to it.
type Config struct {
	// WriteURL is the full URL of the engine's remote write endpoint,
	// e.g. http://vminsert:8480/insert/0/prometheus/api/v1/write.
	WriteURL string
	// QueryURL is the base of the engine's Prometheus HTTP API, to which
	// /api/v1/query etc. are appended: http://vmselect:8481/select/0/prometheus,
	// or http://host:port for a single-node engine.
	QueryURL string
	// HTTP is the client of both; nil means a client without a timeout
	// (each request is bounded by RequestTimeout).
	HTTP *http.Client
	// Header is sent with every request, e.g. X-Scope-OrgID for a Mimir
	// tenant or THANOS-TENANT.
	Header http.Header
	// RequestTimeout bounds one request; zero means one minute.
	RequestTimeout time.Duration
	// MaxResponseBytes bounds the body of one read answer (query,
	// series, labels, export); zero means DefaultMaxResponseBytes. A
	// larger answer fails the read (ErrTooLarge) as soon as the bound is
	// passed, instead of the process's memory.
	MaxResponseBytes int64
	// MemoryBudget bounds what all reads decode and hold at once, in
	// bytes (see budget.go); zero means DefaultMemoryBudget. BudgetWait
	// is the longest a read waits for its first share (zero:
	// DefaultBudgetWait); a read refused for the budget is ErrBudget.
	MemoryBudget int64
	BudgetWait   time.Duration
	// WriteAttempts is how often a write is tried while the engine is
	// unavailable; zero means 5. Backoff doubles from MinBackoff (zero:
	// 100ms) up to MaxBackoff (zero: 5s), with ±20% jitter.
	WriteAttempts          int
	MinBackoff, MaxBackoff time.Duration
	// Relabel, when set, rewrites the labels of every series read (e.g.
	// drops labels an engine adds, such as Thanos' receive_replica);
	// series that end up with equal labels are merged, the sample of the
	// later one kept at a time both hold. It must not keep ls.
	Relabel func(ls labels.Labels) labels.Labels
	// Logger receives retries; nil discards.
	Logger *slog.Logger
	// Registerer receives the client's metrics (requests by operation
	// and outcome, their durations, write retries); nil registers none.
	Registerer prometheus.Registerer
	// Sleep waits between retries; nil waits on a timer (tests pass a
	// fake).
	Sleep func(ctx context.Context, d time.Duration) error
}

// DefaultMaxResponseBytes is Config.MaxResponseBytes when zero: 1 GiB,
// about 40M samples in VictoriaMetrics' export format, far above what a
// server's own point and series limits let one request read.
const DefaultMaxResponseBytes = 1 << 30

// DefaultRequestTimeout bounds one request to the engine when
// Config.RequestTimeout is 0.
const DefaultRequestTimeout = time.Minute

// Client talks to one engine.
type Client struct {
	cfg    Config
	http   *http.Client
	query  *url.URL
	budget *budget

	requests *prometheus.CounterVec   // op, code
	duration *prometheus.HistogramVec // op
	retries  prometheus.Counter
	// export is what the engine answered to /api/v1/export: 0 not yet
	// asked, 1 answered (VictoriaMetrics), 2 not found.
	export atomic.Int32
}

// New checks cfg and returns a client. It does not contact the engine.
func New(cfg Config) (*Client, error) {
	wu, err := url.Parse(cfg.WriteURL)
	if err != nil || (wu.Scheme != "http" && wu.Scheme != "https") || wu.Host == "" {
		return nil, fmt.Errorf("%w: must be an http(s) URL such as http://host:8428/api/v1/write, got %q", ErrBadWriteURL, cfg.WriteURL)
	}
	qu, err := url.Parse(strings.TrimRight(cfg.QueryURL, "/"))
	if err != nil || (qu.Scheme != "http" && qu.Scheme != "https") || qu.Host == "" || qu.RawQuery != "" {
		return nil, fmt.Errorf("%w: must be the http(s) base of the Prometheus API such as http://host:8428 or http://vmselect:8481/select/0/prometheus, got %q", ErrBadQueryURL, cfg.QueryURL)
	}
	if strings.HasSuffix(qu.Path, "/api/v1") || strings.HasSuffix(qu.Path, "/api/v1/query") {
		return nil, fmt.Errorf("%w: give the base without /api/v1 (it is appended), got %q", ErrBadQueryURL, cfg.QueryURL)
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if cfg.MemoryBudget <= 0 {
		cfg.MemoryBudget = DefaultMemoryBudget
	}
	if cfg.MemoryBudget < readBase {
		return nil, fmt.Errorf("memory budget: must be at least %s, the least one read takes, got %d bytes", formatBytes(readBase), cfg.MemoryBudget)
	}
	if cfg.BudgetWait <= 0 {
		cfg.BudgetWait = DefaultBudgetWait
	}
	if cfg.WriteAttempts <= 0 {
		cfg.WriteAttempts = 5
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 100 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleep
	}
	f := promauto.With(cfg.Registerer)
	c := &Client{cfg: cfg, http: cfg.HTTP, query: qu,
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "peakline_remote_requests_total",
			Help: "Requests to the remote engine by operation (write, query, export, series, label…) and HTTP status code (\"error\" when none came back).",
		}, []string{"op", "code"}),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "peakline_remote_request_duration_seconds",
			Help:    "Duration of requests to the remote engine by operation, until the answer's headers.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9),
		}, []string{"op"}),
		retries: f.NewCounter(prometheus.CounterOpts{
			Name: "peakline_remote_write_retries_total",
			Help: "Remote write requests sent again after the engine was unavailable.",
		}),
	}
	refused := f.NewCounter(prometheus.CounterOpts{
		Name: "peakline_remote_memory_refusals_total",
		Help: "Reads of the remote engine refused because other reads held the memory budget.",
	})
	c.budget = newBudget(cfg.MemoryBudget, cfg.BudgetWait, refused)
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "peakline_remote_memory_reserved_bytes",
		Help: "Bytes of the remote memory budget that reads of the engine hold (decoding, or until their querier is closed).",
	}, func() float64 { return float64(c.budget.inUse()) })
	f.NewGauge(prometheus.GaugeOpts{
		Name: "peakline_remote_memory_budget_bytes",
		Help: "The remote memory budget: the most reads of the engine may hold at once.",
	}).Set(float64(cfg.MemoryBudget))
	if c.http == nil {
		c.http = &http.Client{}
	}
	return c, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Write sends series in one remote write 1.0 request, retrying while the
// engine is unavailable (network errors, 5xx, 408, 429). A refusal (other
// 4xx) wraps ErrRejected with the engine's message; running out of
// attempts wraps ErrUnavailable. Remote write is idempotent for equal
// samples, so a retry of a write that did land stores nothing twice.
func (c *Client) Write(ctx context.Context, series []prompb.TimeSeries) error {
	if len(series) == 0 {
		return nil
	}
	req := prompb.WriteRequest{Timeseries: series}
	raw, err := req.Marshal()
	if err != nil {
		return fmt.Errorf("encode remote write request: %w", err)
	}
	body := snappy.Encode(nil, raw)
	backoff := c.cfg.MinBackoff
	for attempt := 1; ; attempt++ {
		err := c.writeOnce(ctx, body)
		if err == nil || errors.Is(err, ErrRejected) || ctx.Err() != nil {
			return err
		}
		if attempt >= c.cfg.WriteAttempts {
			return fmt.Errorf("%w: remote write to %s: %d attempts: %v", ErrUnavailable, c.cfg.WriteURL, attempt, err)
		}
		wait := time.Duration(float64(backoff) * (0.8 + 0.4*rand.Float64()))
		c.cfg.Logger.Warn("remote write failed, retrying", "attempt", attempt, "wait", wait, "err", err)
		c.retries.Inc()
		if err := c.cfg.Sleep(ctx, wait); err != nil {
			return err
		}
		backoff = min(2*backoff, c.cfg.MaxBackoff)
	}
}

func (c *Client) writeOnce(ctx context.Context, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.WriteURL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: build remote write request: %v", ErrRejected, err)
	}
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	req.Header.Set("User-Agent", "peakline")
	c.addHeader(req)
	resp, err := c.do(req, "write")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	err = statusError("remote write", resp.StatusCode, msg)
	if errors.Is(err, ErrRejected) && tooOld(msg) {
		err = fmt.Errorf("%w (the engine takes no samples this old: give it an out-of-order window, e.g. Prometheus storage.tsdb.out_of_order_time_window, Mimir -ingester.out-of-order-time-window)", err)
	}
	return err
}

// tooOld reports whether a write refusal is the engine's for samples
// behind its head: Prometheus' and Thanos' "out of bounds" and "too old
// sample", Mimir's "sample-out-of-bounds" and "sample-timestamp-too-old".
func tooOld(msg []byte) bool {
	m := strings.ToLower(string(msg))
	for _, s := range []string{"out of bounds", "out-of-bounds", "too old", "too-old"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// do sends req, counting it under op.
func (c *Client) do(req *http.Request, op string) (*http.Response, error) {
	if i := strings.IndexByte(op, '/'); i >= 0 {
		op = op[:i] // label/job_id/values: label
	}
	start := time.Now()
	resp, err := c.http.Do(req)
	c.duration.WithLabelValues(op).Observe(time.Since(start).Seconds())
	code := "error"
	if err == nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	c.requests.WithLabelValues(op, code).Inc()
	return resp, err
}

// statusError turns an HTTP status into nil (2xx), an error wrapping
// ErrRejected (a 4xx the sender must not repeat) or a plain error (worth
// a retry).
func statusError(what string, code int, body []byte) error {
	switch {
	case code >= 200 && code < 300:
		return nil
	case code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests:
		return fmt.Errorf("%w: %s: HTTP %d: %s", ErrRejected, what, code, strings.TrimSpace(string(body)))
	}
	return fmt.Errorf("%s: HTTP %d: %s", what, code, strings.TrimSpace(string(body)))
}

// readStatusError is statusError for a read, which is not retried
// here: a 4xx about the read is ErrRejected; a busy engine (503, 429)
// ErrUnavailable, so that the caller (and its client, by a 503 with
// Retry-After) may try again later; a 504 or 408 ErrTimeout; another
// answer ErrFailed.
func readStatusError(what string, code int, body []byte) error {
	if code >= 200 && code < 300 {
		return nil
	}
	return fmt.Errorf("%w: %s: HTTP %d: %s", readStatus(code), what, code, strings.TrimSpace(string(body)))
}

// readStatus classifies the HTTP status of a read's answer.
func readStatus(code int) error {
	switch {
	case code == http.StatusRequestTimeout || code == http.StatusGatewayTimeout:
		return ErrTimeout
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		return ErrUnavailable
	case code >= 400 && code < 500:
		return ErrRejected
	}
	return ErrFailed
}

// apiError is an error answer of the Prometheus HTTP API.
type apiError struct {
	code      int
	errorType string
	msg       string
	url       string // set where the engine failed, to name it
}

func (e *apiError) Error() string {
	if e.url != "" {
		return fmt.Sprintf("%s: HTTP %d: %s: %s", e.url, e.code, e.errorType, e.msg)
	}
	return fmt.Sprintf("HTTP %d: %s: %s", e.code, e.errorType, e.msg)
}

// Unwrap classifies the answer like readStatusError.
func (e *apiError) Unwrap() error { return readStatus(e.code) }

// IsTooLarge reports whether err is the engine's refusal of a read for
// its size (see apiError.tooLarge).
func IsTooLarge(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.tooLarge()
}

// tooLarge reports whether the engine refused a read for its size, so
// that the same read in smaller windows (or per job) may pass:
// Prometheus' and Thanos' --query.max-samples, VictoriaMetrics'
// -search.maxSamplesPerQuery, -search.maxPointsPerTimeseries and
// -search.maxUniqueTimeseries, Mimir's chunk, series and sample limits.
func (e *apiError) tooLarge() bool {
	m := strings.ToLower(e.msg)
	for _, s := range []string{"too many samples", "maxsamplesper", "maxpointsper", "maxuniquetimeseries", "exceeded the maximum number of", "max-samples", "too many points"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// errRequestTimeout is the cause of a read's context when
// Config.RequestTimeout ran out (and not the caller's context).
var errRequestTimeout = errors.New("request timeout")

// withTimeout bounds a request by Config.RequestTimeout.
func (c *Client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, c.cfg.RequestTimeout, errRequestTimeout)
}

// readError classifies an error of a read of u under ctx (bounded by
// withTimeout): the budget's and the limit's refusals as they are, the
// request timeout ErrTimeout, the caller's cancellation as it is, an
// answer of the wrong shape ErrFailed, anything else (the connection)
// ErrUnavailable.
func (c *Client) readError(ctx context.Context, u string, err error) error {
	switch {
	case errors.Is(err, ErrTooLarge), errors.Is(err, ErrBudget), errors.Is(err, errNoExport):
		return err
	case errors.Is(context.Cause(ctx), errRequestTimeout):
		return fmt.Errorf("%w: %s: no answer within %s", ErrTimeout, u, c.cfg.RequestTimeout)
	case ctx.Err() != nil:
		return fmt.Errorf("%s: %w", u, ctx.Err())
	case errors.Is(err, errSyntax):
		return fmt.Errorf("%w: %s: %v", ErrFailed, u, err)
	}
	return fmt.Errorf("%w: %s: %v", ErrUnavailable, u, err)
}

// api calls the Prometheus API at path (appended to the query base) with
// params, by POST form (GET for the label endpoints, which Prometheus
// answers only so), and streams the envelope's data to data, which
// decodes it charging res.
func (c *Client) api(ctx context.Context, path string, params url.Values, data func(*jsonStream) error) error {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	u := c.query.String() + path
	resp, err := c.post(ctx, path, params)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		// Error answers are small: a bounded read of one, decoded whole.
		msg, rerr := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var env struct {
			Status    string `json:"status"`
			ErrorType string `json:"errorType"`
			Error     string `json:"error"`
		}
		ae := &apiError{code: resp.StatusCode, errorType: "http", msg: http.StatusText(resp.StatusCode)}
		if rerr == nil && json.Unmarshal(msg, &env) == nil && env.Status == "error" {
			ae.errorType, ae.msg = env.ErrorType, env.Error
		}
		if !errors.Is(ae, ErrRejected) {
			ae.url = u
		}
		return ae
	}
	s := newJSONStream(c.bounded(resp.Body, u))
	var status, errorType, msg string
	err = s.object(func(key string) error {
		var err error
		switch key {
		case "status":
			status, err = s.str()
		case "errorType":
			errorType, err = s.str()
		case "error":
			msg, err = s.str()
		case "data":
			err = data(s)
		default: // warnings, infos
			err = s.skip()
		}
		return err
	})
	if err != nil {
		return c.readError(ctx, u, err)
	}
	if status != "success" {
		return &apiError{code: resp.StatusCode, errorType: errorType, msg: msg, url: u}
	}
	return nil
}

// bounded reads r, the answer of u, up to Config.MaxResponseBytes;
// beyond, reads fail with an error wrapping ErrTooLarge that names u and
// the bound.
func (c *Client) bounded(r io.Reader, u string) io.Reader {
	return &boundedReader{r: r, left: c.cfg.MaxResponseBytes, max: c.cfg.MaxResponseBytes, url: u}
}

type boundedReader struct {
	r         io.Reader
	left, max int64
	url       string
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly max bytes from a longer one.
		var one [1]byte
		if n, _ := b.r.Read(one[:]); n == 0 {
			return 0, io.EOF
		}
		return 0, fmt.Errorf("%w: %s: more than %s, the most one answer may take; read a shorter time range", ErrTooLarge, b.url, formatBytes(b.max))
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

func (c *Client) post(ctx context.Context, path string, params url.Values) (*http.Response, error) {
	return c.postURL(ctx, c.query.String()+path, strings.TrimPrefix(path, "/api/v1/"), params)
}

// postURL calls u (GET for the label endpoints), counted under op. An
// error is readError's.
func (c *Client) postURL(ctx context.Context, u, op string, params url.Values) (*http.Response, error) {
	var req *http.Request
	var err error
	if strings.HasPrefix(op, "label") {
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, u+"?"+params.Encode(), nil)
	} else {
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(params.Encode()))
		if req != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	}
	if err != nil {
		return nil, fmt.Errorf("build request %s: %w", u, err)
	}
	req.Header.Set("User-Agent", "peakline")
	c.addHeader(req)
	resp, err := c.do(req, op)
	if err != nil {
		return nil, c.readError(ctx, u, err)
	}
	return resp, nil
}

// Delete deletes every series the matchers select, over all time, with
// the engine's delete API (/api/v1/admin/tsdb/delete_series, which
// VictoriaMetrics and Prometheus with --web.enable-admin-api answer; on
// Prometheus the tombstones are then cleaned so that the same series
// written again are not hidden). For a VictoriaMetrics cluster, whose
// query base is vmselect's /select/<tenant>/prometheus, the API is
// vmselect's /delete/<tenant>/prometheus. An engine without it gives
// ErrDeleteUnsupported.
func (c *Client) Delete(ctx context.Context, ms ...*labels.Matcher) error {
	params := url.Values{"match[]": {Selector(ms)}}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	path := "/api/v1/admin/tsdb/delete_series"
	if tenant, ok := strings.CutPrefix(c.query.Path, "/select/"); ok {
		path = "/delete/" + tenant + path // vmselect: from the host's root
		resp, err := c.postURL(ctx, c.query.Scheme+"://"+c.query.Host+path, "admin", params)
		if err != nil {
			return err
		}
		return c.deleted(ctx, resp, params, false)
	}
	resp, err := c.post(ctx, path, params)
	if err != nil {
		return err
	}
	return c.deleted(ctx, resp, params, true)
}

// deleted reads the answer of a delete; clean asks Prometheus to clean
// its tombstones after it.
func (c *Client) deleted(ctx context.Context, resp *http.Response, params url.Values, clean bool) error {
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	switch {
	case strings.Contains(string(msg), "admin APIs disabled"):
		return fmt.Errorf("%w (%s answered HTTP %d, admin APIs disabled): start Prometheus with --web.enable-admin-api, or delete the series with the engine's own tools", ErrDeleteUnsupported, c.query, resp.StatusCode)
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed:
		return fmt.Errorf("%w (%s answered HTTP %d): delete the series with the engine's own tools", ErrDeleteUnsupported, c.query, resp.StatusCode)
	case resp.StatusCode/100 != 2:
		return fmt.Errorf("delete series %s: %w", params.Get("match[]"), readStatusError("delete", resp.StatusCode, msg))
	}
	// Prometheus keeps tombstones until compaction, and they would hide
	// the same series written again; VictoriaMetrics has no such endpoint.
	if !clean {
		return nil
	}
	if resp, err := c.post(ctx, "/api/v1/admin/tsdb/clean_tombstones", nil); err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
	}
	return nil
}

func (c *Client) addHeader(req *http.Request) {
	for name, vals := range c.cfg.Header {
		for _, v := range vals {
			req.Header.Add(name, v)
		}
	}
}

// Selector renders matchers as a PromQL series selector.
func Selector(ms []*labels.Matcher) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		if model.LegacyValidation.IsValidLabelName(m.Name) {
			b.WriteString(m.Name) // older engines take no quoted names
		} else {
			b.WriteString(strconv.Quote(m.Name))
		}
		b.WriteString(m.Type.String())
		b.WriteString(strconv.Quote(m.Value))
	}
	b.WriteByte('}')
	return b.String()
}

// formatTime renders unix ms as the seconds the API takes.
func formatTime(ms int64) string {
	if ms < 0 {
		return "-" + formatTime(-ms)
	}
	return fmt.Sprintf("%d.%03d", ms/1000, ms%1000)
}
