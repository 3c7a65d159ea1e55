package server_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/peakline/peakline/server"
	"github.com/peakline/peakline/tsdb"
)

func put(t *testing.T, url, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, url, bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The collection policy answers GET/PUT, refuses bad values naming the
// field, and survives a restart of the server.
func TestCollectionPolicy(t *testing.T) {
	dir := t.TempDir()
	start := func() (*httptest.Server, func()) {
		store, err := tsdb.Open(filepath.Join(dir, "data"), tsdb.Options{}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		srv, err := server.New(server.Config{SettingsPath: filepath.Join(dir, "settings.json")}, store, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(srv.Handler())
		return hs, func() { hs.Close(); store.Close() }
	}
	hs, stop := start()
	expect := func(method, path, body string, wantCode int, want string) {
		t.Helper()
		var code int
		var got string
		if method == http.MethodGet {
			resp, err := http.Get(hs.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			code, got = resp.StatusCode, string(b)
		} else {
			code, got = put(t, hs.URL+path, body)
		}
		if code != wantCode || !strings.Contains(got, want) {
			t.Fatalf("%s %s %s = %d %s, want %d with %s", method, path, body, code, got, wantCode, want)
		}
	}
	expect("GET", "/api/v1/settings", "", 200, `{"collection":"all"}`)
	expect("GET", "/api/v1/templates/7", "", 200, `{"id":"7","collection":"default"}`)
	expect("PUT", "/api/v1/settings", `{"collection": "opt-in"}`, 200, `"opt-in"`)
	expect("PUT", "/api/v1/settings", `{"collection": "sometimes"}`, 400, `collection: must be \"off\", \"all\" or \"opt-in\", got \"sometimes\"`)
	expect("PUT", "/api/v1/templates/7", `{"collection": "on"}`, 200, `{"id":"7","collection":"on"}`)
	expect("PUT", "/api/v1/templates/8", `{"collection": "off"}`, 200, `"off"`)
	expect("PUT", "/api/v1/templates/9", `{"collection": "yes"}`, 400, `collection: must be \"on\", \"off\" or \"default\"`)
	expect("PUT", "/api/v1/templates/9", `{"id": "10", "collection": "on"}`, 400, `id: \"10\" does not match`)
	expect("PUT", "/api/v1/templates/9", `{"colection": "on"}`, 400, `unknown field`)
	stop()

	hs, stop = start()
	defer stop()
	expect("GET", "/api/v1/settings", "", 200, `{"collection":"opt-in"}`)
	expect("GET", "/api/v1/templates/7", "", 200, `{"id":"7","collection":"on"}`)
	expect("GET", "/api/v1/templates/8", "", 200, `{"id":"8","collection":"off"}`)
	expect("PUT", "/api/v1/templates/8", `{"collection": "default"}`, 200, `"default"`)
	expect("GET", "/api/v1/templates/8", "", 200, `{"id":"8","collection":"default"}`)
}

// Two servers sharing one settings file (replicas on a shared volume)
// answer the same policy: a PUT through one, or an edit of the file, is
// what both answer next.
func TestCollectionPolicySharedFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "settings.json")
	var urls []string
	for i := range 2 {
		srv, err := server.Open(server.Setup{DataDir: filepath.Join(dir, fmt.Sprint("data", i)), Config: server.Config{SettingsPath: path}}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(srv.Handler())
		t.Cleanup(func() { hs.Close(); srv.Close() })
		urls = append(urls, hs.URL)
	}
	get := func(url string) string {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.TrimSpace(string(b))
	}
	if code, body := put(t, urls[0]+"/api/v1/templates/7", `{"collection": "off"}`); code != 200 {
		t.Fatalf("PUT through the first: %d %s", code, body)
	}
	if got, want := get(urls[1]+"/api/v1/templates/7"), `{"id":"7","collection":"off"}`; got != want {
		t.Fatalf("second server: %s, want %s", got, want)
	}
	if code, body := put(t, urls[1]+"/api/v1/settings", `{"collection": "opt-in"}`); code != 200 {
		t.Fatalf("PUT through the second: %d %s", code, body)
	}
	// The template set through the first survived the second's write.
	if got, want := get(urls[0]+"/api/v1/templates/7"), `{"id":"7","collection":"off"}`; got != want {
		t.Fatalf("first server after the second's PUT: %s, want %s", got, want)
	}
	if got, want := get(urls[0]+"/api/v1/settings"), `{"collection":"opt-in"}`; got != want {
		t.Fatalf("first server: %s, want %s", got, want)
	}
	if err := os.WriteFile(path, []byte(`{"collection": "off", "templates": {"7": "on", "8": "on"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, u := range urls {
		if got, want := get(u+"/api/v1/settings"), `{"collection":"off"}`; got != want {
			t.Fatalf("%s after an edit of the file: %s, want %s", u, got, want)
		}
		if got, want := get(u+"/api/v1/templates/8"), `{"id":"8","collection":"on"}`; got != want {
			t.Fatalf("%s after an edit of the file: %s, want %s", u, got, want)
		}
	}
}
