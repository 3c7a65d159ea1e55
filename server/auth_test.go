package server_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/bcrypt"

	"github.com/peakline/peakline/bench/workload"
	"github.com/peakline/peakline/server"
	"github.com/peakline/peakline/tsdb"
)

// Tokens of the test auth file; the read token is given by its hash.
const (
	readToken   = "read-token-0123456789"
	ingestToken = "ingest-token-0123456789"
	adminToken  = "admin-token-0123456789"
	userName    = "alice"
	userPass    = "correct horse battery staple"
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// writeAuthFile writes the test auth file into dir and returns its path.
func writeAuthFile(t *testing.T, dir string) string {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(userPass), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	doc := `tokens:
  - {name: grafana, sha256: "` + sha256Hex(readToken) + `", scopes: [read]}
  - {name: collector, token: "` + ingestToken + `", scopes: [ingest]}
  - {name: ops, token: "` + adminToken + `", scopes: [admin]}
users:
  - {name: ` + userName + `, bcrypt: "` + string(hash) + `", scopes: [read]}
`
	path := filepath.Join(dir, "auth.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

type authEnv struct {
	hs    *httptest.Server
	srv   *server.Server
	store *tsdb.Store
	reg   *prometheus.Registry
	logs  *syncBuffer
}

// syncBuffer is a log sink the server writes from its handlers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newAuthEnv serves a fresh store with the test auth file (sec.Auth is
// filled in) over real HTTP on loopback.
func newAuthEnv(t *testing.T, sec server.SecurityConfig) *authEnv {
	t.Helper()
	env := &authEnv{reg: prometheus.NewRegistry(), logs: &syncBuffer{}}
	// At warn level, as an operator may run it: audit lines must still be
	// written.
	logger := slog.New(slog.NewJSONHandler(env.logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if sec.Auth == nil {
		auth, err := server.NewAuthenticator(writeAuthFile(t, t.TempDir()), logger)
		if err != nil {
			t.Fatal(err)
		}
		sec.Auth = auth
	}
	store, err := tsdb.Open(t.TempDir(), tsdb.Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	env.store = store
	env.srv, err = server.New(server.Config{Security: sec}, store, logger, env.reg)
	if err != nil {
		t.Fatal(err)
	}
	env.hs = httptest.NewServer(env.srv.Handler())
	t.Cleanup(func() {
		env.hs.Close()
		_ = store.Close()
	})
	return env
}

// credential is one way a request authenticates.
type credential struct {
	name string
	set  func(*http.Request)
}

func bearer(tok string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
}

var credentialCases = []credential{
	{"none", func(*http.Request) {}},
	{"read", bearer(readToken)},
	{"ingest", bearer(ingestToken)},
	{"admin", bearer(adminToken)},
	{"wrong token", bearer("not-a-token-of-this-server")},
	{"basic user", func(r *http.Request) { r.SetBasicAuth(userName, userPass) }},
	{"basic wrong password", func(r *http.Request) { r.SetBasicAuth(userName, "guess") }},
}

// do sends one request and returns the status and body.
func do(t *testing.T, method, url, body string, header map[string]string, cred func(*http.Request)) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if cred != nil {
		cred(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestAuthScopesEveryRoute sends every route the server has (taken from
// echo, so a new route fails here until it is given a scope below) with
// every kind of credential, and checks the exact answer: the handler's
// own status when the scope allows it, else 401 or 403.
func TestAuthScopesEveryRoute(t *testing.T) {
	env := newAuthEnv(t, server.SecurityConfig{FailBurst: 1000})
	job := workload.AnsibleJob("j1", workload.JobSpec{Tasks: 2, SamplesPerResource: 10, StartMs: 1796009960000}, 1)
	if resp, body := do(t, "POST", env.hs.URL+"/api/v1/ingest", string(batchJSON(job)), map[string]string{"Content-Type": "application/json"}, bearer(ingestToken)); resp.StatusCode != 200 {
		t.Fatalf("ingest: %d %s", resp.StatusCode, body)
	}

	const promQuery = "?query=up&start=0&end=60&step=15&time=60&match[]=up"
	// want: the scope a route needs and the status the handler gives
	// once allowed, for the request built below.
	type want struct {
		scope string
		code  int
	}
	routes := map[string]want{
		"GET /healthz":                {"open", 200},
		"GET /metrics":                {"read", 200},
		"GET /":                       {"read", 200},
		"HEAD /":                      {"read", 200},
		"GET /jobs/:job":              {"read", 200},
		"HEAD /jobs/:job":             {"read", 200},
		"GET /templates/:template":    {"read", 200},
		"HEAD /templates/:template":   {"read", 200},
		"GET /static/*":               {"read", 200},
		"HEAD /static/*":              {"read", 200},
		"GET /api/v1/jobs":            {"read", 200},
		"GET /api/v1/jobs/:job/graph": {"read", 200},
		"GET /api/v1/jobs/:job/tasks": {"read", 200},
		"DELETE /api/v1/jobs/:job":    {"admin", 404},  // no job "gone"
		"POST /api/v1/ingest":         {"ingest", 400}, // empty body
		"POST /api/v1/write":          {"ingest", 400}, // empty body
		"GET /api/v1/settings":        {"policy", 200}, // read or ingest

		"PUT /api/v1/settings":                       {"admin", 200},
		"GET /api/v1/templates/:id":                  {"policy", 200},
		"PUT /api/v1/templates/:id":                  {"admin", 200},
		"GET /api/v1/templates/:id/history":          {"read", 200},
		"GET /api/v1/templates/:id/rightsize":        {"read", 200},
		"POST /prometheus/api/v1/write":              {"ingest", 400}, // empty body
		"GET /prometheus/api/v1/query":               {"read", 200},
		"POST /prometheus/api/v1/query":              {"read", 200},
		"GET /prometheus/api/v1/query_range":         {"read", 200},
		"POST /prometheus/api/v1/query_range":        {"read", 200},
		"GET /prometheus/api/v1/labels":              {"read", 200},
		"POST /prometheus/api/v1/labels":             {"read", 200},
		"GET /prometheus/api/v1/label/:name/values":  {"read", 200},
		"POST /prometheus/api/v1/label/:name/values": {"read", 200},
		"GET /prometheus/api/v1/series":              {"read", 200},
		"POST /prometheus/api/v1/series":             {"read", 200},
		"GET /prometheus/api/v1/metadata":            {"read", 200},
		"GET /prometheus/api/v1/status/buildinfo":    {"read", 200},
		"GET /prometheus/api/v1/query_exemplars":     {"read", 200},
		"POST /prometheus/api/v1/query_exemplars":    {"read", 200},
		"GET /prometheus/api/v1/rules":               {"read", 200},
		"GET /prometheus/api/v1/alerts":              {"read", 200},
		"GET /prometheus/api/v1/format_query":        {"read", 200},
		"POST /prometheus/api/v1/format_query":       {"read", 200},
	}
	allowed := map[string]map[string]bool{ // credential → scopes it may use
		"read":       {"read": true, "policy": true},
		"ingest":     {"ingest": true, "policy": true},
		"admin":      {"read": true, "ingest": true, "admin": true, "policy": true},
		"basic user": {"read": true, "policy": true},
	}
	seen := map[string]bool{}
	for _, r := range env.srv.Routes() {
		key := r.Method + " " + r.Path
		w, ok := routes[key]
		if !ok {
			t.Errorf("route %s has no expected scope in this test: add it (and to scopeRules if it is not admin)", key)
			continue
		}
		seen[key] = true
		path := strings.NewReplacer(":job", "j1", ":id", "tmpl-7", ":name", "job_id", "*", "style.css").Replace(r.Path)
		if r.Method == "DELETE" {
			path = strings.Replace(r.Path, ":job", "gone", 1)
		}
		header := map[string]string{}
		body := ""
		switch {
		case strings.HasSuffix(r.Path, "/write"):
			header["Content-Type"] = "application/x-protobuf"
		case r.Path == "/api/v1/ingest":
			header["Content-Type"] = "application/json"
		case r.Path == "/api/v1/settings" && r.Method == "PUT":
			header["Content-Type"], body = "application/json", `{"collection": "all"}`
		case r.Path == "/api/v1/templates/:id" && r.Method == "PUT":
			header["Content-Type"], body = "application/json", `{"collection": "on"}`
		case r.Method == "DELETE":
			header["X-Peakline-CSRF"] = "1"
		case strings.HasPrefix(r.Path, "/prometheus/") && r.Method == "POST":
			header["Content-Type"], body = "application/x-www-form-urlencoded", strings.TrimPrefix(promQuery, "?")
		case strings.HasPrefix(r.Path, "/prometheus/"):
			path += promQuery
		}
		for _, cred := range credentialCases {
			resp, got := do(t, r.Method, env.hs.URL+path, body, header, cred.set)
			wantCode := w.code
			switch {
			case w.scope == "open":
			case cred.name == "none" || strings.Contains(cred.name, "wrong"):
				wantCode = 401
			case !allowed[cred.name][w.scope]:
				wantCode = 403
			}
			if resp.StatusCode != wantCode {
				t.Errorf("%s %s as %s: %d %.200s, want %d", r.Method, path, cred.name, resp.StatusCode, got, wantCode)
				continue
			}
			if wantCode == 401 {
				challenge := `Bearer realm="peakline"`
				if !strings.HasPrefix(r.Path, "/api/") && !strings.HasPrefix(r.Path, "/prometheus/") && r.Path != "/metrics" {
					challenge = `Basic realm="peakline", charset="UTF-8"`
				}
				if h := resp.Header.Get("WWW-Authenticate"); h != challenge {
					t.Errorf("%s %s as %s: WWW-Authenticate %q, want %q", r.Method, path, cred.name, h, challenge)
				}
			}
			if wantCode == 403 && r.Method != "HEAD" && !strings.Contains(got, `needs the \"`+w.scope+`\" scope`) {
				t.Errorf("%s %s as %s: 403 %q does not name the scope %q", r.Method, path, cred.name, got, w.scope)
			}
		}
	}
	for key := range routes {
		if !seen[key] {
			t.Errorf("route %s is expected by this test but the server has none", key)
		}
	}
	// A path no route matches needs valid credentials of any scope, then
	// is a 404; a method no route has is an unknown route: admin.
	for _, c := range []struct {
		method, path, cred string
		want               int
	}{
		{"GET", "/api/v1/nope", "none", 401},
		{"GET", "/api/v1/nope", "ingest", 404},
		{"GET", "/nope", "basic user", 404},
		{"POST", "/api/v1/jobs", "read", 403},
		{"POST", "/api/v1/jobs", "admin", 405},
	} {
		i := slices.IndexFunc(credentialCases, func(cr credential) bool { return cr.name == c.cred })
		if resp, got := do(t, c.method, env.hs.URL+c.path, "", nil, credentialCases[i].set); resp.StatusCode != c.want {
			t.Errorf("%s %s as %s: %d %s, want %d", c.method, c.path, c.cred, resp.StatusCode, got, c.want)
		}
	}

	// 7 credentials per route (and one more missing above); refusals are
	// counted by reason.
	n := float64(len(seen))
	for reason, want := range map[string]float64{"missing": n, "invalid_token": n - 1, "invalid_password": n - 1} {
		if got := authFailures(t, env.reg, reason); got != want {
			t.Errorf("peakline_auth_failures_total{reason=%q} = %v, want %v", reason, got, want)
		}
	}
}

// counterValue reads the counter name{labels} from reg; 0 when absent.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func authFailures(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	return counterValue(t, reg, "peakline_auth_failures_total", map[string]string{"reason": reason})
}

// TestAuthRateLimit: after the burst of failures an address gets 429
// with Retry-After until its budget refills on the injected clock; a
// valid token still passes (a shared address must not lock out the
// collectors behind it), and a guessed password locks only its user name.
func TestAuthRateLimit(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	env := newAuthEnv(t, server.SecurityConfig{FailBurst: 3, FailInterval: 2 * time.Second, Now: clock})
	url := env.hs.URL + "/api/v1/jobs"
	f := func(cred func(*http.Request), wantCode int, wantRetry string) {
		t.Helper()
		resp, body := do(t, "GET", url, "", nil, cred)
		if resp.StatusCode != wantCode || resp.Header.Get("Retry-After") != wantRetry {
			t.Fatalf("%d (Retry-After %q) %s, want %d (Retry-After %q)", resp.StatusCode, resp.Header.Get("Retry-After"), body, wantCode, wantRetry)
		}
	}
	wrong := bearer("wrong-token-0123456789")
	f(nil, 401, "") // missing credentials are not guesses: no budget taken
	f(wrong, 401, "")
	f(wrong, 401, "")
	f(wrong, 401, "")
	f(wrong, 429, "2")
	f(bearer(readToken), 200, "") // a right token is never locked out
	advance(time.Second)
	f(wrong, 429, "1")
	advance(time.Second)
	f(wrong, 401, "")
	f(wrong, 429, "2")

	guess := func(r *http.Request) { r.SetBasicAuth(userName, "guess") }
	right := func(r *http.Request) { r.SetBasicAuth(userName, userPass) }
	other := func(r *http.Request) { r.SetBasicAuth("mallory", "guess") }
	f(guess, 401, "")
	f(guess, 401, "")
	f(guess, 401, "")
	f(guess, 429, "2")
	f(right, 429, "2") // a locked name is not checked, so a guess cannot succeed
	f(other, 401, "")  // another name from the same address is not locked
	advance(2 * time.Second)
	f(right, 200, "")
	if got := authFailures(t, env.reg, "rate_limited"); got != 5 {
		t.Errorf("rate_limited failures = %v, want 5", got)
	}
}

// TestAuthFileReload: a changed file takes effect on Reload; a broken one
// keeps the previous credentials and says why.
func TestAuthFileReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "auth.yaml")
	write := func(doc string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`tokens: [{name: a, token: "first-token-0123456789", scopes: [read]}]`)
	auth, err := server.NewAuthenticator(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	env := newAuthEnv(t, server.SecurityConfig{Auth: auth})
	f := func(tok string, want int) {
		t.Helper()
		if resp, body := do(t, "GET", env.hs.URL+"/api/v1/jobs", "", nil, bearer(tok)); resp.StatusCode != want {
			t.Fatalf("token %q: %d %s, want %d", tok, resp.StatusCode, body, want)
		}
	}
	f("first-token-0123456789", 200)
	write(`tokens: [{name: b, token: "second-token-0123456789", scopes: [read]}]`)
	if err := auth.Reload(); err != nil {
		t.Fatal(err)
	}
	f("first-token-0123456789", 401)
	f("second-token-0123456789", 200)
	write(`tokens: [{name: c, token: "short", scopes: [read]}]`)
	if err := auth.Reload(); err == nil || !strings.Contains(err.Error(), "tokens[0] (c): token: must be at least 16 characters") {
		t.Fatalf("reload of a short token: %v", err)
	}
	f("second-token-0123456789", 200)
	// Same size, same modification time, other content (as cp -p or
	// rsync -t leave a file): Reload (SIGHUP) reads the content anyway.
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	write(`tokens: [{name: d, token: "third-token-01234567890", scopes: [read]}]`)
	if err := os.Chtimes(path, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := auth.Reload(); err != nil {
		t.Fatal(err)
	}
	f("second-token-0123456789", 401)
	f("third-token-01234567890", 200)
}

// TestAuthFileErrors: every mistake in an auth file names its place.
func TestAuthFileErrors(t *testing.T) {
	dir := t.TempDir()
	f := func(doc, wantErr string) {
		t.Helper()
		path := filepath.Join(dir, "auth.yaml")
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := server.NewAuthenticator(path, nil)
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("%s: error %v, want one containing %q", doc, err, wantErr)
		}
	}
	f(``, "no tokens and no users")
	f(`tokens: [{name: a, token: "0123456789abcdef", scopes: [write]}]`, `tokens[0] (a): scopes: "write" is not one of read, ingest, admin`)
	f(`tokens: [{name: a, token: "0123456789abcdef"}]`, `tokens[0] (a): scopes: give at least one`)
	f(`tokens: [{name: a, sha256: "abc", scopes: [read]}]`, `tokens[0] (a): sha256: must be 64 hex digits`)
	f(`tokens: [{name: a, sha256: "`+sha256Hex("x")+`", token: "0123456789abcdef", scopes: [read]}]`, `give exactly one of sha256 and token`)
	f(`tokens: [{token: "0123456789abcdef", scopes: [read]}]`, `tokens[0]: name: is required`)
	f(`tokens: [{name: a, token: "0123456789abcdef", scopes: [read]}, {name: a, token: "0123456789abcdeg", scopes: [read]}]`, `tokens[1]: name: "a" is used twice`)
	f(`users: [{name: bob, bcrypt: "plain", scopes: [read]}]`, `users[0] (bob): bcrypt: is not a bcrypt hash`)
	f(`tokens: [{name: a, token: "0123456789abcdef", scope: [read]}]`, `field scope not found`)
	f(`tokens: [`, `parse YAML`)
}
