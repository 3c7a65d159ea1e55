package server_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/peakline/peakline/server"
	"github.com/peakline/peakline/tsdb"
)

// TestSecurityBrowserChecks: the Host check, the cross-site refusals, the
// exact write content types and the response headers, with admin
// credentials so that only these checks can refuse.
func TestSecurityBrowserChecks(t *testing.T) {
	env := newAuthEnv(t, server.SecurityConfig{AllowedHosts: []string{"127.0.0.1", "peakline.example"}})
	u, _ := url.Parse(env.hs.URL)
	jsonCT := map[string]string{"Content-Type": "application/json"}
	with := func(h map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range h {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	f := func(method, path, body string, header map[string]string, wantCode int, wantBody string) {
		t.Helper()
		req, err := http.NewRequest(method, env.hs.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			if k == "Host" {
				req.Host = v
				continue
			}
			req.Header.Set(k, v)
		}
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var doc struct{ Error string }
		_ = jsonDecode(resp, &doc)
		if resp.StatusCode != wantCode || !strings.Contains(doc.Error, wantBody) {
			t.Fatalf("%s %s %v: %d %q, want %d containing %q", method, path, header, resp.StatusCode, doc.Error, wantCode, wantBody)
		}
		for h, v := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "same-origin"} {
			if got := resp.Header.Get(h); got != v {
				t.Fatalf("%s %s: %s %q, want %q", method, path, h, got, v)
			}
		}
		if resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Fatalf("%s %s: Access-Control-Allow-Origin %q, want none", method, path, resp.Header.Get("Access-Control-Allow-Origin"))
		}
	}
	settings := `{"collection": "all"}`
	// Host names.
	f("GET", "/api/v1/settings", "", nil, 200, "")
	f("GET", "/api/v1/settings", "", map[string]string{"Host": "peakline.example:8080"}, 200, "")
	f("GET", "/api/v1/settings", "", map[string]string{"Host": "PEAKLINE.example."}, 200, "")
	f("GET", "/api/v1/settings", "", map[string]string{"Host": "attacker.example"}, 421, `Host "attacker.example" is not served here: add it to serve --allowed-hosts`)
	f("GET", "/healthz", "", map[string]string{"Host": "10.0.0.7"}, 200, "")
	// Cross-site writes.
	f("PUT", "/api/v1/settings", settings, jsonCT, 200, "")
	f("PUT", "/api/v1/settings", settings, with(jsonCT, "Origin", env.hs.URL), 200, "")
	f("PUT", "/api/v1/settings", settings, with(jsonCT, "Origin", "https://attacker.example"), 403, `Origin "https://attacker.example" is not this server (`+u.Host+`)`)
	f("PUT", "/api/v1/settings", settings, with(jsonCT, "Origin", "null"), 403, `Origin "null" is not this server`)
	f("PUT", "/api/v1/settings", settings, with(jsonCT, "Sec-Fetch-Site", "cross-site"), 403, `Sec-Fetch-Site is "cross-site"`)
	f("PUT", "/api/v1/settings", settings, with(jsonCT, "Sec-Fetch-Site", "same-origin"), 200, "")
	// PUT and DELETE need no extra header: a page of another site cannot
	// send them without a CORS preflight, which is never granted, and
	// the Origin and Sec-Fetch-Site checks refuse a browser's anyway.
	f("PUT", "/api/v1/settings", settings, nil, 200, "")
	f("PUT", "/api/v1/settings", settings, map[string]string{"Content-Type": "text/plain"}, 415, `Content-Type must be application/json, got "text/plain"`)
	f("DELETE", "/api/v1/jobs/x", "", nil, 404, "")
	f("DELETE", "/api/v1/jobs/x", "", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, `Sec-Fetch-Site is "cross-site"`)
	f("DELETE", "/api/v1/jobs/x", "", map[string]string{"Sec-Fetch-Site": "same-site"}, 403, `Sec-Fetch-Site is "same-site"`)
	f("DELETE", "/api/v1/jobs/x", "", map[string]string{"Origin": "http://localhost:1"}, 403, `Origin "http://localhost:1" is not this server`)
	f("DELETE", "/api/v1/jobs/x", "", map[string]string{"X-Requested-With": "fetch"}, 404, "")
	f("POST", "/api/v1/ingest", "{}", with(jsonCT, "Sec-Fetch-Site", "cross-site"), 403, "cross-site request refused")
	f("POST", "/prometheus/api/v1/query", "query=1", map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": "https://grafana.example"}, 200, "") // a read
	// Content types of the writes.
	f("POST", "/api/v1/ingest", "{}", map[string]string{"Content-Type": "text/plain"}, 415, `Content-Type must be application/json, got "text/plain"`)
	f("POST", "/api/v1/ingest", "{}", nil, 415, `Content-Type must be application/json, got ""`)
	f("POST", "/api/v1/ingest", "{}", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, "Content-Type must be application/json")
	f("POST", "/api/v1/write", "", map[string]string{"Content-Type": "text/plain"}, 415, `Content-Type must be application/x-protobuf, got "text/plain"`)
	f("POST", "/prometheus/api/v1/write", "", nil, 415, `Content-Type must be application/x-protobuf, got ""`)
	// Ids in paths.
	long := strings.Repeat("a", 257)
	f("GET", "/api/v1/jobs/"+long+"/graph", "", nil, 400, "job: is 257 bytes long, at most 256 allowed")
	f("GET", "/api/v1/templates/"+long, "", nil, 400, "id: is 257 bytes long, at most 256 allowed")
	f("GET", "/api/v1/templates/a%0Ab", "", nil, 400, "id: must not contain control characters")
	f("GET", "/api/v1/jobs/"+strings.Repeat("a", 256)+"/graph", "", nil, 404, "")
	// A job id with quotes and angle brackets is a valid id.
	f("GET", "/api/v1/jobs/"+url.PathEscape(`"><img src=x>`)+"/graph", "", nil, 404, "")

	// The page carries its own CSP; the API a closed one.
	resp, _ := do(t, "GET", env.hs.URL+"/", "", nil, bearer(readToken))
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("page CSP %q", csp)
	}
	resp, _ = do(t, "GET", env.hs.URL+"/api/v1/jobs", "", nil, bearer(readToken))
	if csp := resp.Header.Get("Content-Security-Policy"); csp != "default-src 'none'; frame-ancestors 'none'" {
		t.Errorf("API CSP %q", csp)
	}
}

func jsonDecode(resp *http.Response, dst any) error { return json.NewDecoder(resp.Body).Decode(dst) }

// TestSecurityAudit: every admin request is one "audit" line naming who
// did what to which target and how it ended, and is counted.
func TestSecurityAudit(t *testing.T) {
	env := newAuthEnv(t, server.SecurityConfig{MaxTemplates: 2})
	csrf := map[string]string{"X-Peakline-CSRF": "1"}
	jsonCT := map[string]string{"Content-Type": "application/json"}
	f := func(method, path, body string, header map[string]string, cred func(*http.Request), wantCode int) {
		t.Helper()
		if resp, got := do(t, method, env.hs.URL+path, body, header, cred); resp.StatusCode != wantCode {
			t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, got, wantCode)
		}
	}
	f("DELETE", "/api/v1/jobs/"+url.PathEscape("a/b"), "", csrf, bearer(adminToken), 404)
	f("DELETE", "/api/v1/jobs/j2", "", csrf, bearer(readToken), 403)
	f("PUT", "/api/v1/settings", `{"collection": "opt-in"}`, jsonCT, bearer(adminToken), 200)
	f("PUT", "/api/v1/templates/7", `{"collection": "on"}`, jsonCT, nil, 401)
	f("PUT", "/api/v1/templates/7", `{"collection": "on"}`, jsonCT, bearer(adminToken), 200)
	f("PUT", "/api/v1/templates/8", `{"collection": "off"}`, jsonCT, bearer(adminToken), 200)
	f("PUT", "/api/v1/templates/9", `{"collection": "on"}`, jsonCT, bearer(adminToken), 409)
	f("PUT", "/api/v1/templates/8", `{"collection": "on"}`, jsonCT, bearer(adminToken), 200)      // a change, not a new one
	f("PUT", "/api/v1/templates/7", `{"collection": "default"}`, jsonCT, bearer(adminToken), 200) // frees a place
	f("PUT", "/api/v1/templates/9", `{"collection": "on"}`, jsonCT, bearer(adminToken), 200)
	f("GET", "/api/v1/settings", "", nil, bearer(adminToken), 200) // a read: not audited
	// Neither are methods no route has: they could add lines and metric
	// series without bound.
	f("MADEUP", "/api/v1/jobs/j2", "", nil, nil, 401)
	f("OPTIONS", "/api/v1/settings", "", nil, nil, 401)
	f("POST", "/api/v1/jobs", "", nil, bearer(adminToken), 405)

	type line struct {
		Msg, Action, Who, Target, Remote, Outcome string
		Code                                      int
	}
	var got []line
	for _, l := range strings.Split(strings.TrimSpace(env.logs.String()), "\n") {
		var ln line
		if err := json.Unmarshal([]byte(l), &ln); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if ln.Msg == "audit" {
			got = append(got, ln)
		}
		if strings.Contains(l, adminToken) || strings.Contains(l, readToken) {
			t.Fatalf("a token was logged: %s", l)
		}
	}
	want := []line{
		{"audit", "DELETE /api/v1/jobs/:job", "ops", "a/b", "127.0.0.1", "refused", 404},
		{"audit", "DELETE /api/v1/jobs/:job", "grafana", "j2", "127.0.0.1", "denied", 403},
		{"audit", "PUT /api/v1/settings", "ops", "/api/v1/settings", "127.0.0.1", "ok", 200},
		{"audit", "PUT /api/v1/templates/:id", "unauthenticated", "7", "127.0.0.1", "denied", 401},
		{"audit", "PUT /api/v1/templates/:id", "ops", "7", "127.0.0.1", "ok", 200},
		{"audit", "PUT /api/v1/templates/:id", "ops", "8", "127.0.0.1", "ok", 200},
		{"audit", "PUT /api/v1/templates/:id", "ops", "9", "127.0.0.1", "refused", 409},
		{"audit", "PUT /api/v1/templates/:id", "ops", "8", "127.0.0.1", "ok", 200},
		{"audit", "PUT /api/v1/templates/:id", "ops", "7", "127.0.0.1", "ok", 200},
		{"audit", "PUT /api/v1/templates/:id", "ops", "9", "127.0.0.1", "ok", 200},
	}
	if len(got) != len(want) {
		t.Fatalf("audit lines:\n%+v\nwant\n%+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("audit line %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, c := range []struct {
		action, outcome string
		want            float64
	}{
		{"PUT /api/v1/templates/:id", "ok", 5},
		{"PUT /api/v1/templates/:id", "refused", 1},
		{"PUT /api/v1/templates/:id", "denied", 1},
		{"DELETE /api/v1/jobs/:job", "denied", 1},
		{"PUT /api/v1/settings", "ok", 1},
	} {
		if got := counterValue(t, env.reg, "peakline_admin_actions_total", map[string]string{"action": c.action, "outcome": c.outcome}); got != c.want {
			t.Errorf("peakline_admin_actions_total{action=%q,outcome=%q} = %v, want %v", c.action, c.outcome, got, c.want)
		}
	}
}

// TestSecurityWithoutAuth: without an auth file every route answers
// without credentials and the audit names the caller "anonymous"; the
// browser checks still hold.
func TestSecurityWithoutAuth(t *testing.T) {
	logs := &syncBuffer{}
	store, err := tsdb.Open(t.TempDir(), tsdb.Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	srv, err := server.New(server.Config{}, store, slog.New(slog.NewJSONHandler(logs, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	f := func(method, path string, header map[string]string, wantCode int) {
		t.Helper()
		if resp, got := do(t, method, hs.URL+path, "", header, nil); resp.StatusCode != wantCode {
			t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, got, wantCode)
		}
	}
	f("GET", "/api/v1/jobs", nil, 200)
	f("GET", "/", nil, 200)
	f("DELETE", "/api/v1/jobs/x", nil, 404) // curl -X DELETE on loopback
	f("DELETE", "/api/v1/jobs/x", map[string]string{"Origin": "http://attacker.example"}, 403)
	f("POST", "/api/v1/ingest", map[string]string{"Content-Type": "text/plain"}, 415)
	if !strings.Contains(logs.String(), `"msg":"audit","action":"DELETE /api/v1/jobs/:job","who":"anonymous","target":"x","remote":"127.0.0.1","outcome":"refused","code":404}`) {
		t.Fatalf("no anonymous audit line in:\n%s", logs.String())
	}
}
