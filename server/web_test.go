package server

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/peakline/peakline/tsdb"
	"github.com/peakline/peakline/web"
)

// newWebTestServer serves an empty store: the page routes need no data.
func newWebTestServer(t *testing.T) *httptest.Server {
	t.Helper()
	store, err := tsdb.Open(t.TempDir(), tsdb.Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	s, err := New(Config{}, store, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

func TestWebRoutes(t *testing.T) {
	ts := newWebTestServer(t)
	f := func(method, path string, header http.Header, wantCode int, wantType, wantBody string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, ts.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != wantCode {
			t.Errorf("%s %s: status %d, want %d (%s)", method, path, resp.StatusCode, wantCode, body)
		}
		if ct := resp.Header.Get("Content-Type"); wantType != "" && !strings.HasPrefix(ct, wantType) {
			t.Errorf("%s %s: Content-Type %q, want %s", method, path, ct, wantType)
		}
		if !strings.Contains(string(body), wantBody) {
			t.Errorf("%s %s: body lacks %q:\n%.300s", method, path, wantBody, body)
		}
		return resp
	}
	f("GET", "/", nil, 200, "text/html", `src="/static/jobs.js"`)
	f("GET", "/jobs/demo2", nil, 200, "text/html", `src="/static/job.js"`)
	f("GET", "/jobs/ansible-perf-2026-11-30T03:39:20.072139", nil, 200, "text/html", `src="/static/job.js"`)
	f("GET", "/jobs/a%2Fb", nil, 200, "text/html", `src="/static/job.js"`)
	f("HEAD", "/jobs/demo2", nil, 200, "text/html", "")
	f("GET", "/templates/7", nil, 200, "text/html", `src="/static/template.js"`)
	f("GET", "/templates/deploy%20web", nil, 200, "text/html", `src="/static/template.js"`)
	f("GET", "/static/template.js", nil, 200, "text/javascript", "import ")
	f("GET", "/static/job.js", nil, 200, "text/javascript", "import ") // module scripts need a JavaScript type
	f("GET", "/static/style.css", nil, 200, "text/css", ":root")
	f("GET", "/static/favicon.svg", nil, 200, "image/svg+xml", "<svg")
	f("GET", "/static/nope.js", nil, 404, "application/json", `"error"`)
	f("GET", "/static/", nil, 404, "application/json", `"error"`)
	f("GET", "/static/../server.go", nil, 404, "", "")
	f("GET", "/static/%2e%2e/web.go", nil, 404, "", "")
	f("POST", "/jobs/demo2", nil, 405, "", "")

	// Caching: revalidate every time, answer 304 while the file is the same.
	resp := f("GET", "/static/chart.js", nil, 200, "text/javascript", "")
	etag := resp.Header.Get("ETag")
	if etag == "" || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("chart.js: ETag %q, Cache-Control %q; want an ETag and no-cache", etag, resp.Header.Get("Cache-Control"))
	}
	f("GET", "/static/chart.js", http.Header{"If-None-Match": {etag}}, 304, "", "")
	f("GET", "/static/chart.js", http.Header{"If-None-Match": {`W/"other"`}}, 200, "text/javascript", "")
	page := f("GET", "/", nil, 200, "text/html", "")
	f("GET", "/", http.Header{"If-None-Match": {page.Header.Get("ETag")}}, 304, "", "")
	for _, h := range []string{"Content-Security-Policy", "X-Content-Type-Options"} {
		if page.Header.Get(h) == "" {
			t.Errorf("GET /: no %s header", h)
		}
	}
	if csp := page.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
		t.Errorf("GET /: Content-Security-Policy %q, want only the server's own scripts", csp)
	}
	// gzip for those who ask.
	f("GET", "/static/chart.js", http.Header{"Accept-Encoding": {"gzip"}}, 200, "text/javascript", "")
}

// TestWebFilesSelfContained checks that every file a page loads is
// embedded and that nothing is loaded from elsewhere (the page must work
// without network access).
func TestWebFilesSelfContained(t *testing.T) {
	fsys := web.Static()
	refs := regexp.MustCompile(`(?:src|href)="([^"]+)"|from '([^']+)'|import\(['"]([^'"]+)['"]\)|url\(([^)]+)\)`)
	external := regexp.MustCompile(`(?i)(?:src|href)="(?:https?:)?//|from '(?:https?:)?//|url\((?:['"])?(?:https?:)?//|@import`)
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		if m := external.Find(body); m != nil {
			t.Errorf("%s loads something from another origin: %s", name, m)
		}
		if !strings.HasSuffix(name, ".html") && !strings.HasSuffix(name, ".js") {
			return nil
		}
		for _, m := range refs.FindAllSubmatch(body, -1) {
			ref := string(m[1]) + string(m[2]) + string(m[3]) + string(m[4])
			switch {
			case strings.HasPrefix(ref, "/static/"):
				ref = strings.TrimPrefix(ref, "/static/")
			case strings.HasPrefix(ref, "./"):
				ref = strings.TrimPrefix(ref, "./")
			default:
				continue // page links (/, /jobs/…) and data
			}
			if _, err := fs.Stat(fsys, ref); err != nil {
				t.Errorf("%s refers to %q, which is not embedded: %v", name, ref, err)
			}
		}
		if strings.HasSuffix(name, ".html") && regexp.MustCompile(`<script>|<style>| style="| on[a-z]+="`).Match(body) {
			t.Errorf("%s has inline script or style, which the Content-Security-Policy blocks", name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{web.JobsPage, web.JobPage, web.TemplatePage} {
		if _, err := fs.Stat(fsys, p); err != nil {
			t.Errorf("page %s: %v", p, err)
		}
	}
}
