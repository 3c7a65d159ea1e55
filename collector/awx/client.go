package awx

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/peakline/peakline/collector/ship"
)

// Defaults of Config.
const (
	DefaultTimeout       = 30 * time.Second
	DefaultMaxPageBytes  = 8 << 20
	DefaultMaxPageEvents = 1000
	DefaultMaxInFlight   = 4
	// PageSize is the page_size the client asks for: AWX's MAX_PAGE_SIZE.
	PageSize = 200
)

// Config configures a Client. URL and TokenFile are required.
type Config struct {
	// URL is the AWX base URL (--awx-url), such as https://awx.example;
	// a path prefix is kept (https://example/awx).
	URL string
	// TokenFile holds the bearer token (--awx-token-file), read once by
	// NewClient. A read-only personal access token is enough.
	TokenFile string
	// CAFile is a PEM bundle trusted for AWX's certificate besides the
	// system roots (--awx-ca-file); "" trusts the system roots only.
	CAFile string
	// Timeout bounds one request, answer body included; 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// MaxPageBytes bounds the body of one answer; a larger one is refused
	// with ErrTooLarge. 0 means DefaultMaxPageBytes.
	MaxPageBytes int64
	// MaxPageEvents bounds the events of one page; more is refused with
	// ErrTooLarge. 0 means DefaultMaxPageEvents.
	MaxPageEvents int
	// PageSize is the page_size of Events; 0 means PageSize (AWX's
	// largest). Tests set it lower to get several pages.
	PageSize int
	// MaxInFlight bounds the requests to AWX in flight at once, across all
	// the jobs that share the Client; 0 means DefaultMaxInFlight.
	MaxInFlight int
	// Log receives warnings; nil discards them. The token is never logged.
	Log *slog.Logger
}

// Client is a read-only client of one AWX API. It is safe for concurrent
// use; each method makes exactly one HTTP request (no retries: callers pace
// themselves with Backoff).
type Client struct {
	base      *url.URL // scheme, host and path prefix without a trailing slash
	origin    string   // scheme://host, lower case
	tokenFile string
	header    string // "Bearer <token>"
	http      *http.Client
	maxBytes  int64
	maxEvents int
	pageSize  int
	slots     chan struct{}

	mu sync.Mutex
	// outage is whether AWX itself fails (unreachable, 5xx, 429, a
	// refused token) as the followers sharing the client last saw it.
	outage bool
}

// noteOutcome records a follower's request outcome in the client-wide
// outage state and reports whether an outage of AWX itself started or
// ended with it, so that the followers sharing the client log it once.
// A failure of one job's own (no such job, a page too large) is neither.
func (c *Client) noteOutcome(err error) (started, ended bool) {
	var re *RetryableError
	var ae *AuthError
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil:
		ended, c.outage = c.outage, false
	case errors.As(err, &re) || errors.As(err, &ae):
		started, c.outage = !c.outage, true
	}
	return started, ended
}

// NewClient reads cfg's token file and CA bundle. An unreadable or empty
// token file, a token that is not one line of printable characters, a CA
// file without a certificate or a URL that is not http(s) is an error naming
// the flag and the file.
func NewClient(cfg Config) (*Client, error) {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("--awx-url: must be an http:// or https:// URL such as https://awx.example, got %q", cfg.URL)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	if cfg.TokenFile == "" {
		return nil, errors.New("--awx-token-file: give the file holding a read-only AWX token")
	}
	// Read as the server's --token-file is: the token reads every job's
	// output.
	token, err := ship.ReadTokenFile("--awx-token-file", cfg.TokenFile, log)
	if err != nil {
		return nil, err
	}
	if u.Scheme == "http" && !ship.IsLoopback(u.Hostname()) {
		log.Warn("the AWX token goes in clear over http; use an https:// --awx-url", "awx_url", cfg.URL, "token_file", cfg.TokenFile)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.CAFile != "" {
		pool, err := ship.CertPool("--awx-ca-file", cfg.CAFile)
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	}
	c := &Client{
		base:      u,
		origin:    strings.ToLower(u.Scheme + "://" + u.Host),
		tokenFile: cfg.TokenFile,
		header:    "Bearer " + token,
		maxBytes:  cmpOr(cfg.MaxPageBytes, DefaultMaxPageBytes),
		maxEvents: cmpOr(cfg.MaxPageEvents, DefaultMaxPageEvents),
		pageSize:  cmpOr(cfg.PageSize, PageSize),
		slots:     make(chan struct{}, cmpOr(cfg.MaxInFlight, DefaultMaxInFlight)),
	}
	c.http = &http.Client{
		Transport: tr,
		Timeout:   cmpOr(cfg.Timeout, DefaultTimeout),
		// A redirect may only stay on the AWX host (AWX adds the trailing
		// slash of /api/v2/jobs/42 that way): the token goes nowhere else.
		CheckRedirect: func(r *http.Request, via []*http.Request) error {
			if !c.sameOrigin(r.URL) {
				return fmt.Errorf("AWX redirected to %s, another host than --awx-url: %w", r.URL.Redacted(), ErrForeignLink)
			}
			if len(via) >= 5 {
				return errors.New("AWX redirected 5 times")
			}
			return nil
		},
	}
	return c, nil
}

func cmpOr[T int | int64 | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// URL returns the base URL the client talks to.
func (c *Client) URL() string { return c.base.String() }

// TokenFile returns the file the token was read from.
func (c *Client) TokenFile() string { return c.tokenFile }

func (c *Client) sameOrigin(u *url.URL) bool {
	return strings.ToLower(u.Scheme+"://"+u.Host) == c.origin
}

// Job gets the job's metadata: GET /api/v2/jobs/{id}/.
func (c *Client) Job(ctx context.Context, id int64) (Job, error) {
	var raw rawJob
	if err := c.get(ctx, fmt.Sprintf("/api/v2/jobs/%d/", id), id, &raw); err != nil {
		return Job{}, fmt.Errorf("get AWX job %d: %w", id, err)
	}
	return raw.job(), nil
}

// UnifiedJob asks AWX what unified job id is:
// GET /api/v2/unified_jobs/?id={id}, whose one item has the job's type
// and URL besides the fields of its type (but event_processing_finished,
// which the list leaves out). AWX answers an empty list for an id it
// does not know or that the token's user may not see: that is
// ErrJobNotFound, as a 404 is.
func (c *Client) UnifiedJob(ctx context.Context, id int64) (Job, error) {
	var raw rawUnified
	if err := c.get(ctx, fmt.Sprintf("/api/v2/unified_jobs/?id=%d", id), id, &raw); err != nil {
		return Job{}, fmt.Errorf("get AWX unified job %d: %w", id, err)
	}
	for i := range raw.Results {
		if raw.Results[i].ID == id {
			j := raw.Results[i].job()
			if j.Type == "" || j.URL == "" {
				return Job{}, fmt.Errorf("get AWX unified job %d: the answer names no type or url", id)
			}
			return j, nil
		}
	}
	return Job{}, fmt.Errorf("get AWX unified job %d: %w: AWX lists no unified job of that id (count %d)", id, ErrJobNotFound, raw.Count)
}

// JobAt gets a unified job's metadata from its URL (Job.URL, as
// UnifiedJob gave it), which must stay on the AWX host.
func (c *Client) JobAt(ctx context.Context, id int64, ref string) (Job, error) {
	var raw rawJob
	if err := c.get(ctx, ref, id, &raw); err != nil {
		return Job{}, fmt.Errorf("get AWX unified job %d: %w", id, err)
	}
	return raw.job(), nil
}

// Events gets one page of the job's events with a counter above
// afterCounter, in counter order, Config.PageSize at most:
// GET /api/v2/jobs/{id}/job_events/?order_by=counter&counter__gt=N&page_size=200.
func (c *Client) Events(ctx context.Context, id, afterCounter int64) (Page, error) {
	return c.events(ctx, id, afterCounter, c.pageSize)
}

// events is Events with a page size of its own, at most Config.PageSize.
func (c *Client) events(ctx context.Context, id, afterCounter int64, pageSize int) (Page, error) {
	q := url.Values{}
	q.Set("order_by", "counter")
	q.Set("counter__gt", strconv.FormatInt(afterCounter, 10))
	q.Set("page_size", strconv.Itoa(min(max(pageSize, 1), c.pageSize)))
	return c.page(ctx, id, fmt.Sprintf("/api/v2/jobs/%d/job_events/?%s", id, q.Encode()))
}

// eventsAt is events of the list at path (EventsPath of the job's type).
func (c *Client) eventsAt(ctx context.Context, path string, id, afterCounter int64, pageSize int) (Page, error) {
	q := url.Values{}
	q.Set("order_by", "counter")
	q.Set("counter__gt", strconv.FormatInt(afterCounter, 10))
	q.Set("page_size", strconv.Itoa(min(max(pageSize, 1), c.pageSize)))
	return c.page(ctx, id, path+"?"+q.Encode())
}

// NextPage gets the page a Page.Next link names. The link is taken
// relative to the AWX base URL and must stay on the AWX host: a link to
// another host is refused with ErrForeignLink, the token is not sent.
func (c *Client) NextPage(ctx context.Context, id int64, next string) (Page, error) {
	return c.page(ctx, id, next)
}

func (c *Client) page(ctx context.Context, id int64, ref string) (Page, error) {
	var raw rawPage
	if err := c.get(ctx, ref, id, &raw); err != nil {
		return Page{}, fmt.Errorf("get AWX job %d events: %w", id, err)
	}
	if len(raw.Results) > c.maxEvents {
		return Page{}, fmt.Errorf("get AWX job %d events: %w: %d events in one page, at most %d are read", id, ErrTooLarge, len(raw.Results), c.maxEvents)
	}
	p := Page{Count: raw.Count, Next: raw.Next, Previous: raw.Previous, Events: make([]Event, 0, len(raw.Results))}
	for i := range raw.Results {
		ev, err := raw.Results[i].event()
		if err != nil {
			return Page{}, fmt.Errorf("get AWX job %d events: %w", id, err)
		}
		p.Events = append(p.Events, ev)
	}
	return p, nil
}

// AllEvents gets every event of the job, following the pages' next
// links, retrying 429, 5xx and network errors as b says (sleep waits;
// nil uses a timer). For a finished job (import): a running job's list
// grows while it is read.
func (c *Client) AllEvents(ctx context.Context, id int64, b Backoff, sleep func(context.Context, time.Duration) error) ([]Event, error) {
	var all []Event
	ref := ""
	for {
		var p Page
		err := Retry(ctx, b, sleep, func() error {
			var err error
			if ref == "" {
				p, err = c.Events(ctx, id, 0)
			} else {
				p, err = c.NextPage(ctx, id, ref)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		all = append(all, p.Events...)
		if p.Next == "" {
			return all, nil
		}
		ref = p.Next
	}
}

// resolve makes ref (an absolute path, or a URL on the AWX host) a URL
// under the base.
func (c *Client) resolve(ref string) (*url.URL, error) {
	r, err := url.Parse(ref)
	if err != nil {
		return nil, fmt.Errorf("bad link %q: %w", ref, err)
	}
	if r.Scheme != "" || r.Host != "" || r.Opaque != "" {
		if !c.sameOrigin(r) {
			return nil, fmt.Errorf("link %s leads to another host than --awx-url %s: %w", r.Redacted(), c.base.Redacted(), ErrForeignLink)
		}
		return r, nil
	}
	if !strings.HasPrefix(r.Path, "/") {
		return nil, fmt.Errorf("link %q is not an absolute path: %w", ref, ErrForeignLink)
	}
	u := *c.base
	// AWX's links carry its full path (request.get_full_path), prefix
	// included when AWX is served under one.
	if c.base.Path == "" || !strings.HasPrefix(r.Path, c.base.Path+"/") {
		u.Path = c.base.Path + r.Path
	} else {
		u.Path = r.Path
	}
	u.RawQuery = r.RawQuery
	return &u, nil
}

// get makes one GET request and decodes the JSON answer into dst.
func (c *Client) get(ctx context.Context, ref string, jobID int64, dst any) error {
	u, err := c.resolve(ref)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", c.header)
	select {
	case c.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-c.slots }()
	resp, err := c.http.Do(req)
	if err != nil {
		if errors.Is(err, ErrForeignLink) || ctx.Err() != nil {
			return err
		}
		return &RetryableError{Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return c.statusError(resp, jobID)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBytes+1))
	if err != nil {
		return &RetryableError{Err: fmt.Errorf("read answer: %w", err)}
	}
	if int64(len(data)) > c.maxBytes {
		return fmt.Errorf("%w: the answer is over %d bytes", ErrTooLarge, c.maxBytes)
	}
	if err := json.Unmarshal(data, dst); err != nil {
		if ct := resp.Header.Get("Content-Type"); !strings.Contains(ct, "json") {
			// A login page or a proxy's page: AWX is not what answers,
			// so it is retried as AWX not answering.
			return &RetryableError{StatusCode: resp.StatusCode, Err: fmt.Errorf(
				"%s answered %q, not JSON: is --awx-url the base URL of AWX itself (not a login page or a proxy's)? %w", u.Path, ct, err)}
		}
		return fmt.Errorf("decode answer of %s: %w", u.Path, err)
	}
	return nil
}

// maxErrorBody bounds the part of an error answer kept for the message.
const maxErrorBody = 512

func (c *Client) statusError(resp *http.Response, jobID int64) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	msg := strings.TrimSpace(string(body))
	var detail struct {
		Detail string `json:"detail"`
	}
	if json.Unmarshal(body, &detail) == nil && detail.Detail != "" {
		msg = detail.Detail
	}
	status := fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	switch code := resp.StatusCode; {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return &AuthError{StatusCode: code, Message: msg, TokenFile: c.tokenFile}
	case code == http.StatusNotFound:
		return fmt.Errorf("%w: AWX has no job %d (%s)", ErrJobNotFound, jobID, status)
	case code == http.StatusTooManyRequests || code >= 500:
		return &RetryableError{StatusCode: code, RetryAfter: retryAfter(resp.Header.Get("Retry-After")), Err: fmt.Errorf("AWX answered %s: %s", status, msg)}
	}
	return fmt.Errorf("AWX answered %s: %s", status, msg)
}

// maxRetryAfter caps a Retry-After the client honours.
const maxRetryAfter = 10 * time.Minute

// retryAfter reads a Retry-After header in seconds; 0 when absent or an
// HTTP date (AWX and its proxies send seconds).
func retryAfter(h string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(h))
	if err != nil || n < 0 {
		return 0
	}
	return min(time.Duration(n)*time.Second, maxRetryAfter)
}
