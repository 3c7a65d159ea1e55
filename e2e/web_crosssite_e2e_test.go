package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// crossSitePage is a page of another site that tries every write a
// browser could make on Peakline at TARGET: fetch DELETE and PUT with and
// without credentials and in no-cors mode, and a form POST of a
// JSON-looking text/plain body into the ingest. window.results gets
// the outcome of each fetch; window.done is set when all have settled.
const crossSitePage = `<!doctype html><html><body>
<iframe name="sink"></iframe>
<form id="f" method="POST" action="TARGET/api/v1/ingest" enctype="text/plain" target="sink">
<input name='{"job_id":"evil","series":[],"x":"' value='"}'>
</form>
<script>
const target = "TARGET";
const settings = JSON.stringify({collection: "off"});
const attempts = [
  ["delete omit", () => fetch(target + "/api/v1/jobs/victim", {method: "DELETE", credentials: "omit"})],
  ["delete include", () => fetch(target + "/api/v1/jobs/victim", {method: "DELETE", credentials: "include"})],
  ["delete no-cors", () => fetch(target + "/api/v1/jobs/victim", {method: "DELETE", mode: "no-cors", credentials: "include"})],
  ["put omit", () => fetch(target + "/api/v1/settings", {method: "PUT", credentials: "omit", headers: {"Content-Type": "application/json"}, body: settings})],
  ["put include", () => fetch(target + "/api/v1/settings", {method: "PUT", credentials: "include", headers: {"Content-Type": "application/json"}, body: settings})],
  ["put plain include", () => fetch(target + "/api/v1/settings", {method: "PUT", credentials: "include", body: settings})],
  ["post no-cors", () => fetch(target + "/api/v1/ingest", {method: "POST", mode: "no-cors", credentials: "include", headers: {"Content-Type": "text/plain"}, body: '{"job_id":"evil","series":[]}'})],
];
window.results = {};
(async () => {
  for (const [name, f] of attempts) {
    try {
      const r = await f();
      window.results[name] = r.type + " " + r.status;
    } catch (e) {
      window.results[name] = e.name;
    }
  }
  document.getElementById("f").submit();
  document.querySelector("iframe").addEventListener("load", () => { window.done = true; });
})();
</script></body></html>`

// TestWebCrossSiteWrites opens a page of another site (localhost, while
// Peakline is 127.0.0.1: another site to the browser) in headless
// Chromium, which tries to delete a job, change the collection policy
// and ingest. Peakline runs once without auth on loopback and once with
// an auth file and the browser sending admin credentials on every
// request. Each time the browser refuses the fetches (their preflight
// is never granted) and the server refuses what reaches it: no DELETE
// or PUT is ever audited, the two POSTs are 403, the job and the policy
// are as they were.
func TestWebCrossSiteWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("browser end-to-end test: skipped under -short")
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("the cross-site test needs Debian's chromium in PATH (%v); go test -short skips it", err)
	}
	browser := webBrowser(t, chromium)
	dir := t.TempDir()
	authFile := filepath.Join(dir, "auth.yaml")
	if err := os.WriteFile(authFile, []byte(`tokens: [{name: ops, token: "admin-token-0123456789", scopes: [admin]}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		args       []string
		credential string // sent by the browser on every request, and by the test
	}{
		{"no auth", nil, ""},
		{"admin credentials", []string{"--auth-file", authFile}, "Bearer admin-token-0123456789"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := webServe(t, webBuild(t), filepath.Join(t.TempDir(), "data"), tc.args...)
			api := func(method, path, body string) (int, string) {
				t.Helper()
				req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
				if tc.credential != "" {
					req.Header.Set("Authorization", tc.credential)
				}
				if body != "" {
					req.Header.Set("Content-Type", "application/json")
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			if code, body := api("POST", "/api/v1/ingest", `{"job_id":"victim","series":[{"resource":"cpu","counter":1,"uuid":"u","task":"t","t":[`+fmt.Sprint(time.Now().Add(-time.Hour).UnixMilli())+`],"v":[1]}]}`); code != 200 {
				t.Fatalf("ingest the victim job: %d %s", code, body)
			}
			_, policy := api("GET", "/api/v1/settings", "")

			attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				_, _ = io.WriteString(w, strings.ReplaceAll(crossSitePage, "TARGET", srv.URL))
			}))
			defer attacker.Close()
			page := strings.Replace(attacker.URL, "127.0.0.1", "localhost", 1)

			tab := webOpenTab(t, browser)
			if tc.credential != "" {
				tab.do(t, chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
					_, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": tc.credential}})
					return err
				}))
			}
			tab.navigate(t, page)
			tab.poll(t, `window.done === true`)
			got := webEval[map[string]string](t, tab, `window.results`)
			want := map[string]string{
				"delete omit": "TypeError", "delete include": "TypeError", "delete no-cors": "TypeError",
				"put omit": "TypeError", "put include": "TypeError", "put plain include": "TypeError",
				"post no-cors": "opaque 0", // sent; its answer is hidden from the page
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("the page's fetches ended %v, want %v", got, want)
			}

			// What the server received and how it answered.
			code, metrics := api("GET", "/metrics", "")
			if code != 200 {
				t.Fatalf("GET /metrics: %d", code)
			}
			var admin, ingest []string
			sc := bufio.NewScanner(strings.NewReader(metrics))
			for sc.Scan() {
				line := sc.Text()
				switch {
				case strings.HasPrefix(line, "peakline_admin_actions_total{"):
					admin = append(admin, line)
				case strings.HasPrefix(line, `peakline_http_request_duration_seconds_count{code=`) && strings.Contains(line, `route="/api/v1/ingest"`):
					ingest = append(ingest, line)
				}
			}
			if len(admin) != 0 {
				t.Errorf("admin actions reached the server: %q", admin)
			}
			wantIngest := []string{
				`peakline_http_request_duration_seconds_count{code="200",route="/api/v1/ingest"} 1`,
				`peakline_http_request_duration_seconds_count{code="403",route="/api/v1/ingest"} 2`,
			}
			if fmt.Sprint(ingest) != fmt.Sprint(wantIngest) {
				t.Errorf("ingest requests %q, want %q (the test's own, then the form's and the no-cors fetch's)", ingest, wantIngest)
			}
			if code, body := api("GET", "/api/v1/jobs/victim/tasks", ""); code != 200 {
				t.Errorf("the victim job after the attempts: %d %s", code, body)
			}
			if code, body := api("GET", "/api/v1/jobs/evil/tasks", ""); code != 404 {
				t.Errorf("a job ingested by the page: %d %s", code, body)
			}
			if _, now := api("GET", "/api/v1/settings", ""); now != policy {
				t.Errorf("the policy changed from %s to %s", policy, now)
			}

			// The same writes from a plain client with only Authorization
			// (curl -X DELETE) are taken.
			if code, body := api("PUT", "/api/v1/settings", `{"collection":"off"}`); code != 200 {
				t.Errorf("PUT /api/v1/settings from a plain client: %d %s", code, body)
			}
			req, _ := http.NewRequest("DELETE", srv.URL+"/api/v1/jobs/victim", nil)
			if tc.credential != "" {
				req.Header.Set("Authorization", tc.credential)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("DELETE from a plain client: %d", resp.StatusCode)
			}
		})
	}
}
