package ship

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// MaxAnswerBytes bounds the answer Get reads.
const MaxAnswerBytes = 256 << 20

// Get GETs path (with query q, when not nil) of the server's API and
// decodes its JSON answer into dst. A non-2xx answer is an error wrapping
// a *StatusError (and, for a 401 or 403, an *AuthError).
func (c *Client) Get(ctx context.Context, path string, q url.Values, dst any) error {
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return c.do(ctx, http.MethodGet, path, dst)
}

// Delete sends DELETE path (with the header the server's CSRF check asks
// of a deletion) and discards the answer. A non-2xx answer is an error
// wrapping a *StatusError.
func (c *Client) Delete(ctx context.Context, path string) error {
	return c.do(ctx, http.MethodDelete, path, nil)
}

// do sends a request without a body to BaseURL + path; a 2xx answer is
// decoded into dst when dst is not nil.
func (c *Client) do(ctx context.Context, method, path string, dst any) error {
	u := strings.TrimSuffix(c.BaseURL, "/") + path
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return fmt.Errorf("make request %s %s: %w", method, path, err)
	}
	if method != http.MethodGet {
		req.Header.Set("X-Peakline-CSRF", "1")
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		se := readStatusError(resp)
		if ae, ok := authRefused(se, c.TokenFile); ok {
			return fmt.Errorf("%s %s: %w", method, path, ae)
		}
		return fmt.Errorf("%s %s: %w", method, path, se)
	}
	if dst == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes+1))
	if err != nil {
		return fmt.Errorf("read the answer to %s %s: %w", method, path, err)
	}
	if len(body) > MaxAnswerBytes {
		return fmt.Errorf("%s %s: answer larger than %d bytes", method, path, MaxAnswerBytes)
	}
	if err := json.Unmarshal(body, dst); err != nil {
		return fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
	}
	return nil
}
