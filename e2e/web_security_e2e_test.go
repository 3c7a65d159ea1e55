package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"golang.org/x/crypto/bcrypt"

	"github.com/peakline/peakline/collector/ship"
)

// Hostile names: a task whose name is markup that would run a script if
// inserted as HTML, and a job id with quotes and angle brackets.
const (
	xssTask  = `<img src=x onerror=alert(1)>`
	xssJobID = `q"uote'<b>bold</b>&amp;`
)

// TestWebSecurityEscaping serves a store behind an auth file, checks that
// the page asks a browser for Basic credentials, then opens the jobs list
// and the job page in headless Chromium logged in as a read-only user:
// the hostile names are shown as text, no element is made of them and no
// dialog opens.
func TestWebSecurityEscaping(t *testing.T) {
	if testing.Short() {
		t.Skip("browser end-to-end test: skipped under -short")
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("the web security test needs Debian's chromium in PATH (%v); go test -short skips it", err)
	}
	dir := t.TempDir()
	hash, err := bcrypt.GenerateFromPassword([]byte("viewer-password"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	authFile := filepath.Join(dir, "auth.yaml")
	doc := "tokens: [{name: loader, token: \"ingest-token-0123456789\", scopes: [ingest]}]\n" +
		"users: [{name: viewer, bcrypt: \"" + string(hash) + "\", scopes: [read]}]\n"
	if err := os.WriteFile(authFile, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := webServe(t, webBuild(t), filepath.Join(dir, "data"), "--auth-file", authFile)

	start := time.Now().Add(-time.Hour).UnixMilli()
	batch := &ship.Batch{
		JobID:     xssJobID,
		Tasks:     []ship.Task{{Counter: 3, UUID: webUUID(1), Name: xssTask, StartMs: start}},
		LastEvent: &ship.Event{Counter: 5, TimeMs: start + 4000},
		Series: []ship.Series{{Resource: "cpu", Counter: 3, UUID: webUUID(1), Task: xssTask,
			Ts: []int64{start + 500, start + 1500, start + 2500}, Vs: []float64{10, 90, 30}}},
		JobInfo: ship.JobInfo{TemplateID: xssJobID, TemplateName: xssTask},
	}
	body, err := json.Marshal(batch)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", srv.URL+"/api/v1/ingest", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer ingest-token-0123456789")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("ingest: %d", resp.StatusCode)
	}
	// Without credentials the page asks the browser for a login.
	resp, err = http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != `Basic realm="peakline", charset="UTF-8"` {
		t.Fatalf("GET / without credentials: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}

	browser := webBrowser(t, chromium)
	tab := &webTab{}
	var mu sync.Mutex
	var dialogs []string
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithListener(func(ev any) {
		tab.listen(ev)
		if d, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			mu.Lock()
			dialogs = append(dialogs, d.Message)
			mu.Unlock()
		}
	}))
	defer cancel()
	tab.ctx = ctx
	// Every request of the tab carries the viewer's Basic credentials,
	// as a browser does once the user has logged in.
	login := "Basic " + base64.StdEncoding.EncodeToString([]byte("viewer:viewer-password"))
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(webViewportW, webViewportH), chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": login}})
		return err
	})); err != nil {
		t.Fatalf("open a browser tab: %v", err)
	}
	dialogCtx, stopDialogs := context.WithCancel(ctx)
	defer stopDialogs()
	go func() {
		// Close any dialog at once so that the page goes on; it is
		// counted above.
		for _, err := range chromedp.Events(dialogCtx, page.JavascriptDialogOpening) {
			if err != nil {
				return
			}
			_, _ = chromedp.Call(dialogCtx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()

	noInjectedMarkup := func(where string) {
		t.Helper()
		if n := webEval[int](t, tab, `document.querySelectorAll('img[src="x"], b').length`); n != 0 {
			t.Errorf("%s: %d elements were made of a hostile name", where, n)
		}
	}

	tab.navigate(t, srv.URL+"/")
	tab.poll(t, `window.peakline && window.peakline.ready`)
	rows := webEval[[]string](t, tab, `[...document.querySelectorAll('#jobs-body tr')].map(r => r.dataset.job)`)
	if len(rows) != 1 || rows[0] != xssJobID {
		t.Fatalf("jobs list rows %q, want the one job %q", rows, xssJobID)
	}
	if text := webEval[string](t, tab, `document.querySelector('#jobs-body tr').textContent`); !strings.Contains(text, xssJobID) {
		t.Errorf("jobs list row %q does not show the job id as text", text)
	}
	if target := webEval[string](t, tab, `decodeURIComponent(new URL(document.querySelector('#jobs-body a').href).pathname.slice('/jobs/'.length))`); target != xssJobID {
		t.Errorf("the job link leads to job %q, want %q", target, xssJobID)
	}
	noInjectedMarkup("jobs list")

	tab.navigate(t, srv.URL+"/jobs/"+url.PathEscape(xssJobID))
	tab.waitLoads(t, 1)
	if got := webEval[string](t, tab, `document.getElementById('job-id').textContent`); got != xssJobID {
		t.Errorf("job id shown as %q, want %q", got, xssJobID)
	}
	if got := webEval[string](t, tab, `document.title`); got != "Job "+xssJobID+" · Peakline" {
		t.Errorf("title %q", got)
	}
	tab.waitText(t, "body", xssTask)
	tab.waitText(t, "#job-template", xssTask)
	noInjectedMarkup("job page")

	// The template page of the hostile template id and name.
	tab.navigate(t, srv.URL+"/templates/"+url.PathEscape(xssJobID))
	tab.poll(t, `window.peakline && window.peakline.ready`)
	if got := webEval[string](t, tab, `document.getElementById('template-name').textContent + '|' + (window.peakline.error || '')`); got != xssTask+"|" {
		t.Errorf("template page shows name|error %q, want %q", got, xssTask+"|")
	}
	tab.waitText(t, "#history", xssTask)
	noInjectedMarkup("template page")
	// A script injected through onerror would have run by the time the
	// image failed; give it that time, then look for its dialog.
	tab.settle()
	mu.Lock()
	defer mu.Unlock()
	if len(dialogs) != 0 {
		t.Errorf("dialogs opened: %q", dialogs)
	}
	tab.checkProblems(t)
}
