package live

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// policyTimeout bounds the policy check, which delays the job's start.
const policyTimeout = 3 * time.Second

// Policy is the server's collection policy for one job, as its policy
// endpoints answer: `peakline collect` and `peakline agent` both obey it.
type Policy struct {
	System   string // GET /api/v1/settings: off, all, opt-in
	Template string // GET /api/v1/templates/{id}: on, off, default
}

// Decide applies docs/CONTRACTS.md: off → never; all → unless the
// template says off; opt-in → only when the template says on. A value
// this collector does not know collects, and says so in reason.
func (p Policy) Decide() (collect bool, reason string) {
	switch p.System {
	case "off":
		return false, "collection is off on the server"
	case "all":
		if p.Template == "off" {
			return false, "collection is off for this template"
		}
		return true, "collection is on for all jobs"
	case "opt-in":
		if p.Template == "on" {
			return true, "this template opted in"
		}
		return false, "collection is opt-in and this template did not opt in"
	}
	return true, fmt.Sprintf("unknown collection setting %q: collecting", p.System)
}

// FetchPolicy asks the server at base URL server for the system setting
// and, when template (a template id) is not "" and collection is not off,
// the template's; otherwise Template is "default". It gives up after 3s.
// An error means the server could not be asked: the callers collect.
func FetchPolicy(ctx context.Context, client *http.Client, server, template string) (Policy, error) {
	ctx, cancel := context.WithTimeout(ctx, policyTimeout)
	defer cancel()
	base := strings.TrimRight(server, "/")
	p := Policy{Template: "default"}
	var settings struct {
		Collection string `json:"collection"`
	}
	if err := getJSON(ctx, client, base+"/api/v1/settings", &settings); err != nil {
		return p, err
	}
	p.System = settings.Collection
	if template == "" || p.System == "off" {
		return p, nil
	}
	var tmpl struct {
		Collection string `json:"collection"`
	}
	if err := getJSON(ctx, client, base+"/api/v1/templates/"+url.PathEscape(template), &tmpl); err != nil {
		return p, err
	}
	p.Template = tmpl.Collection
	return p, nil
}

func getJSON(ctx context.Context, client *http.Client, u string, dst any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("cannot make request %q: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("cannot get %q: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64*1024))
	if err != nil {
		return fmt.Errorf("cannot read %q: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("cannot get %q: server answered %s", u, resp.Status)
	}
	if err := json.Unmarshal(body, dst); err != nil {
		return fmt.Errorf("cannot parse %q: %w", u, err)
	}
	return nil
}
