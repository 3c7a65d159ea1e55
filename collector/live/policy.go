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

// collectionPolicy is the answer of the server's policy endpoints.
type collectionPolicy struct {
	system   string // settings: off, all, opt-in
	template string // template: on, off, default
}

// decideCollection applies docs/CONTRACTS.md: off → never; all → unless
// the template says off; opt-in → only when the template says on. A value
// this collector does not know collects, and says so in reason.
func decideCollection(p collectionPolicy) (collect bool, reason string) {
	switch p.system {
	case "off":
		return false, "collection is off on the server"
	case "all":
		if p.template == "off" {
			return false, "collection is off for this template"
		}
		return true, "collection is on for all jobs"
	case "opt-in":
		if p.template == "on" {
			return true, "this template opted in"
		}
		return false, "collection is opt-in and this template did not opt in"
	}
	return true, fmt.Sprintf("unknown collection setting %q: collecting", p.system)
}

// fetchPolicy asks the server for the system setting and, when template is
// not "", the template's. Without a template the template is "default".
func fetchPolicy(ctx context.Context, client *http.Client, server, template string) (collectionPolicy, error) {
	ctx, cancel := context.WithTimeout(ctx, policyTimeout)
	defer cancel()
	base := strings.TrimRight(server, "/")
	p := collectionPolicy{template: "default"}
	var settings struct {
		Collection string `json:"collection"`
	}
	if err := getJSON(ctx, client, base+"/api/v1/settings", &settings); err != nil {
		return p, err
	}
	p.system = settings.Collection
	if template == "" || p.system == "off" {
		return p, nil
	}
	var tmpl struct {
		Collection string `json:"collection"`
	}
	if err := getJSON(ctx, client, base+"/api/v1/templates/"+url.PathEscape(template), &tmpl); err != nil {
		return p, err
	}
	p.template = tmpl.Collection
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
