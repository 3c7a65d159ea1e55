package ship

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// IngestPath is the server path batches are posted to.
const IngestPath = "/api/v1/ingest"

// maxErrorBody bounds how much of an error response Send reads.
const maxErrorBody = 64 << 10

// Client is the one client of a Peakline server's own HTTP API: it posts
// ingest batches (Send) and reads and deletes (Get, Delete; api.go). Every
// non-2xx answer becomes a *StatusError, the server's {"error": …}
// decoded once (readStatusError). It is safe for concurrent use if HTTP is.
type Client struct {
	// BaseURL is the server's root, e.g. "http://peakline:9090"; a
	// trailing slash is ignored.
	BaseURL string
	// HTTP does the requests; nil means http.DefaultClient. Timeouts are
	// its business, or the context's.
	HTTP *http.Client
	// TokenFile names the --token-file whose token HTTP sends (see
	// Transport), for the *AuthError of a 401 or 403; "" when none is sent.
	TokenFile string
}

// NewClient is the Client of a command's --server and client flags: its
// requests go through NewTransport(tc, baseURL, log) (token, TLS).
func NewClient(tc TransportConfig, baseURL string, log *slog.Logger) (*Client, error) {
	tr, err := NewTransport(tc, baseURL, log)
	if err != nil {
		return nil, err
	}
	return &Client{BaseURL: baseURL, HTTP: &http.Client{Transport: tr}, TokenFile: tc.TokenFile}, nil
}

// StatusError is a non-2xx answer of the server: its HTTP status and the
// server's "error" message (or the start of the body when it sent none).
type StatusError struct {
	StatusCode int
	Message    string
	// RetryAfter is the wait the server asked for in a Retry-After header
	// (delay-seconds, or an HTTP-date taken relative to the answer's Date
	// header); 0 when it asked for none.
	RetryAfter time.Duration
}

func (e *StatusError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("server answered %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	}
	return fmt.Sprintf("server answered %d %s: %s", e.StatusCode, http.StatusText(e.StatusCode), e.Message)
}

// Send posts b as gzip-compressed JSON to BaseURL + IngestPath. A non-2xx
// answer is an error wrapping a *StatusError.
func (c *Client) Send(ctx context.Context, b *Batch) error {
	var enc Encoder
	body, err := enc.Encode(b)
	if err != nil {
		return err
	}
	if err := c.SendEncoded(ctx, body); err != nil {
		return fmt.Errorf("send batch of job %q: %w", b.JobID, err)
	}
	return nil
}

// SendPatiently is Send for one-shot clients (import --server): an answer
// the server asks to retry (408, 425, 429, 5xx, e.g. 503 while the job's
// deletion is removed from disk) is retried after its Retry-After (at
// least a second, at most a minute), until ctx ends or patience has
// passed since the first try; every other error returns at once. onRetry,
// when set, hears of each wait.
func (c *Client) SendPatiently(ctx context.Context, b *Batch, patience time.Duration, onRetry func(err error, wait time.Duration)) error {
	deadline := time.Now().Add(patience)
	for {
		err := c.Send(ctx, b)
		var se *StatusError
		if err == nil || !errors.As(err, &se) || !retryable(se.StatusCode) {
			return err
		}
		wait := min(max(se.RetryAfter, time.Second), time.Minute)
		if time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("%w (still refused after %s)", err, patience)
		}
		if onRetry != nil {
			onRetry(err, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// SendEncoded posts a batch already encoded as gzip-compressed JSON (by
// Encoder, or read back from a spool) unchanged. A non-2xx answer is
// an error wrapping a *StatusError; a 401 or 403 one also wraps an
// *AuthError.
func (c *Client) SendEncoded(ctx context.Context, body []byte) error {
	url := strings.TrimSuffix(c.BaseURL, "/") + IngestPath
	// A *bytes.Reader body lets the transport replay it on redirect/retry.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("make ingest request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")

	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("post to %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody)) // lets the connection be reused
		return nil
	}
	se := readStatusError(resp)
	if ae, ok := authRefused(se, c.TokenFile); ok {
		return fmt.Errorf("post to %s: %w", url, ae)
	}
	return fmt.Errorf("post to %s: %w", url, se)
}

// Encoder turns batches into gzip-compressed JSON, reusing its
// compressor from one batch to the next. It is not safe for concurrent use.
type Encoder struct {
	zw *gzip.Writer
}

// Encode returns the gzip-compressed JSON of b in a new slice.
func (e *Encoder) Encode(b *Batch) ([]byte, error) {
	var buf bytes.Buffer
	if e.zw == nil {
		e.zw, _ = gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	} else {
		e.zw.Reset(&buf)
	}
	if err := json.NewEncoder(e.zw).Encode(b); err != nil {
		return nil, fmt.Errorf("encode batch of job %q: %w", b.JobID, err)
	}
	if err := e.zw.Close(); err != nil {
		return nil, fmt.Errorf("compress batch of job %q: %w", b.JobID, err)
	}
	return buf.Bytes(), nil
}

// readStatusError makes a *StatusError of a non-2xx response.
func readStatusError(resp *http.Response) *StatusError {
	e := &StatusError{StatusCode: resp.StatusCode, RetryAfter: retryAfter(resp.Header)}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var envelope struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(data, &envelope) == nil && envelope.Error != "" {
		e.Message = envelope.Error
		return e
	}
	msg := strings.TrimSpace(string(data))
	if len(msg) > 200 {
		msg = strings.ToValidUTF8(msg[:200], "") + "…"
	}
	e.Message = msg
	return e
}

// retryAfter reads a Retry-After header: delay-seconds, or an HTTP-date
// less the answer's own Date (both are the server's clock, so the
// collector's does not matter). It returns 0 for no header, a date without
// a Date header, a date in the past or a value that does not parse.
func retryAfter(h http.Header) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(min(secs, int64(24*time.Hour/time.Second))) * time.Second
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	date, err := http.ParseTime(h.Get("Date"))
	if err != nil || !at.After(date) {
		return 0
	}
	return at.Sub(date)
}
