package awx_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/collector/awx"
	"github.com/peakline/peakline/collector/awx/awxtest"
)

// loopsEvents is a real ansible-runner job_events dir: 32 events, counters
// 1 to 32, task starts at 3, 10, 13, 16, 23, 26 and 29 (a handler).
const loopsEvents = "../../testdata/ansible/runner-loops/artifacts/loops/job_events"

const testToken = "t0ken-of-awx"

// tokenFile writes a token file and returns its path.
func tokenFile(t *testing.T, token string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "awx-token")
	if err := os.WriteFile(p, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// newPair starts a fake AWX serving the loops job as job 42 and a client
// of it.
func newPair(t *testing.T, opts awxtest.Options, cfg awx.Config) (*awxtest.Server, *awx.Client) {
	t.Helper()
	if opts.Token == "" {
		opts.Token = testToken
	}
	srv := awxtest.NewServer(opts)
	t.Cleanup(srv.Close)
	srv.AddJob(awxtest.Job{ID: 42, Name: "loops", TemplateID: 7, TemplateName: "perf loops", Playbook: "loops.yml", ExecutionNode: "node-1"}, loopsEvents)
	cfg.URL = srv.URL
	if cfg.TokenFile == "" {
		cfg.TokenFile = tokenFile(t, testToken)
	}
	c, err := awx.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

func counters(evs []awx.Event) []int64 {
	out := make([]int64, len(evs))
	for i, ev := range evs {
		out[i] = ev.Counter
	}
	return out
}

func seq(from, to int64) []int64 {
	var out []int64
	for c := from; c <= to; c++ {
		out = append(out, c)
	}
	return out
}

func TestClientPagesFollowRelativeNextLinks(t *testing.T) {
	srv, c := newPair(t, awxtest.Options{}, awx.Config{PageSize: 10})
	ctx := context.Background()
	p, err := c.Events(ctx, 42, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got [][]int64
	var nexts []string
	for {
		got = append(got, counters(p.Events))
		nexts = append(nexts, p.Next)
		if p.Count != 32 {
			t.Fatalf("page %d: count %d, want 32", len(got), p.Count)
		}
		if p.Next == "" {
			break
		}
		if p, err = c.NextPage(ctx, 42, p.Next); err != nil {
			t.Fatal(err)
		}
	}
	want := [][]int64{seq(1, 10), seq(11, 20), seq(21, 30), seq(31, 32)}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("pages %v, want %v", got, want)
	}
	wantNext := []string{
		"/api/v2/jobs/42/job_events/?counter__gt=0&order_by=counter&page=2&page_size=10",
		"/api/v2/jobs/42/job_events/?counter__gt=0&order_by=counter&page=3&page_size=10",
		"/api/v2/jobs/42/job_events/?counter__gt=0&order_by=counter&page=4&page_size=10",
		"",
	}
	if !slices.Equal(nexts, wantNext) {
		t.Fatalf("next links %q, want %q", nexts, wantNext)
	}
	if n := srv.RequestCount(42); n != 4 {
		t.Fatalf("%d requests, want 4", n)
	}
	all, err := c.AllEvents(ctx, 42, awx.Backoff{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(counters(all), seq(1, 32)) {
		t.Fatalf("AllEvents counters %v", counters(all))
	}
	// A task start as the runner wrote it, created in AWX's form.
	ev := all[2]
	want3 := awx.Event{
		Counter: 3, Created: time.Date(2026, 11, 30, 4, 22, 19, 520442000, time.UTC),
		Event: "playbook_on_task_start", UUID: ev.UUID, TaskUUID: ev.TaskUUID,
		Task: "burn cpu per item, then notify", Play: ev.Play, Playbook: "loops.yml",
		TaskPath: ev.TaskPath, HostName: "",
	}
	if ev != want3 || ev.UUID == "" || ev.TaskUUID != ev.UUID || ev.Play == "" || !strings.HasSuffix(ev.TaskPath, "loops.yml:6") {
		t.Fatalf("event 3 = %+v", ev)
	}
}

func TestClientEventsAfterCounter(t *testing.T) {
	f := func(after int64, want []int64) {
		t.Helper()
		_, c := newPair(t, awxtest.Options{}, awx.Config{})
		p, err := c.Events(context.Background(), 42, after)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(counters(p.Events), want) || p.Count != len(want) || p.Next != "" {
			t.Fatalf("after %d: counters %v count %d next %q, want %v", after, counters(p.Events), p.Count, p.Next, want)
		}
	}
	f(0, seq(1, 32))
	f(29, seq(30, 32))
	f(31, []int64{32})
	f(32, []int64{})
	f(1000, []int64{})
}

func TestClientJob(t *testing.T) {
	srv, c := newPair(t, awxtest.Options{}, awx.Config{})
	started := time.Date(2026, 11, 30, 4, 22, 19, 0, time.UTC)
	srv.SetJob(awxtest.Job{ID: 42, Name: "loops", Status: "successful", TemplateID: 7, TemplateName: "perf loops",
		Playbook: "loops.yml", ExecutionNode: "node-1", Started: started, Finished: started.Add(9 * time.Second), EventProcessingFinished: true,
		Forks: 10, SCMRevision: "3f2c9e1a", EEImage: "quay.io/ansible/awx-ee:24.6.1"})
	got, err := c.Job(context.Background(), 42)
	if err != nil {
		t.Fatal(err)
	}
	want := awx.Job{ID: 42, Type: awx.TypeJob, URL: "/api/v2/jobs/42/", Name: "loops", Status: "successful", TemplateID: 7, TemplateName: "perf loops",
		Playbook: "loops.yml", ExecutionNode: "node-1", Started: started, Finished: started.Add(9 * time.Second), EventProcessingFinished: true,
		Forks: 10, ProjectRevision: "3f2c9e1a", EEImage: "quay.io/ansible/awx-ee:24.6.1"}
	if got != want || !got.Final() {
		t.Fatalf("job %+v, want %+v", got, want)
	}
	if info := got.Info(); info != (ansible.JobInfo{TemplateID: "7", TemplateName: "perf loops", Status: "successful", Playbook: "loops.yml",
		Forks: 10, ProjectRevision: "3f2c9e1a", EEImage: "quay.io/ansible/awx-ee:24.6.1"}) {
		t.Fatalf("info %+v", info)
	}
	// AWX's forks 0 runs ansible's default.
	srv.AddJob(awxtest.Job{ID: 44, Status: "running"}, t.TempDir())
	if got, err := c.Job(context.Background(), 44); err != nil || got.Info().Forks != ansible.DefaultForks || got.EEImage != "" {
		t.Fatalf("job 44: %+v %v, want forks %d", got, err, ansible.DefaultForks)
	}
	_, err = c.Job(context.Background(), 43)
	if !errors.Is(err, awx.ErrJobNotFound) || !strings.Contains(err.Error(), "43") {
		t.Fatalf("job 43: %v, want ErrJobNotFound naming 43", err)
	}
}

func TestClientRefusesLinkToAnotherHost(t *testing.T) {
	var otherHits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { otherHits.Add(1) }))
	defer other.Close()
	_, c := newPair(t, awxtest.Options{LinkPrefix: other.URL}, awx.Config{PageSize: 10})
	p, err := c.Events(context.Background(), 42, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.Next, other.URL+"/api/v2/") {
		t.Fatalf("next %q does not lead to the other host", p.Next)
	}
	_, err = c.NextPage(context.Background(), 42, p.Next)
	if !errors.Is(err, awx.ErrForeignLink) {
		t.Fatalf("next link to another host: %v, want ErrForeignLink", err)
	}
	_, err = c.AllEvents(context.Background(), 42, awx.Backoff{}, nil)
	if !errors.Is(err, awx.ErrForeignLink) {
		t.Fatalf("AllEvents: %v, want ErrForeignLink", err)
	}
	if n := otherHits.Load(); n != 0 {
		t.Fatalf("the other host got %d requests", n)
	}
	// A relative link that is not a path is refused too.
	if _, err := c.NextPage(context.Background(), 42, "//"+strings.TrimPrefix(other.URL, "http://")+"/x"); !errors.Is(err, awx.ErrForeignLink) {
		t.Fatalf("scheme-relative link: %v, want ErrForeignLink", err)
	}
}

func TestClientRedirectToAnotherHostIsRefused(t *testing.T) {
	var gotAuth atomic.Value
	gotAuth.Store("")
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { gotAuth.Store("hit:" + r.Header.Get("Authorization")) }))
	defer other.Close()
	redirector := httptest.NewServer(http.RedirectHandler(other.URL+"/api/v2/jobs/42/", http.StatusFound))
	defer redirector.Close()
	c, err := awx.NewClient(awx.Config{URL: redirector.URL, TokenFile: tokenFile(t, testToken)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Job(context.Background(), 42); !errors.Is(err, awx.ErrForeignLink) {
		t.Fatalf("redirect to another host: %v, want ErrForeignLink", err)
	}
	if v := gotAuth.Load().(string); v != "" {
		t.Fatalf("the other host got a request (%q)", v)
	}
}

func TestClientAuthErrors(t *testing.T) {
	for _, tc := range []struct {
		name, token string
	}{
		{"wrong token", "not-the-token"},
		{"token of another server", testToken + "x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := tokenFile(t, tc.token)
			srv, c := newPair(t, awxtest.Options{}, awx.Config{TokenFile: file})
			_, err := c.Events(context.Background(), 42, 0)
			var ae *awx.AuthError
			if !errors.As(err, &ae) || ae.StatusCode != http.StatusUnauthorized || ae.TokenFile != file {
				t.Fatalf("err %v, want an AuthError 401 naming %s", err, file)
			}
			if !strings.Contains(err.Error(), file) || strings.Contains(err.Error(), tc.token) {
				t.Fatalf("message %q must name the file and not hold the token", err)
			}
			var re *awx.RetryableError
			if errors.As(err, &re) {
				t.Fatal("an auth error must not be retryable")
			}
			// Retry gives up at once on it: one request.
			if _, err := c.AllEvents(context.Background(), 42, awx.Backoff{}, func(context.Context, time.Duration) error {
				t.Fatal("slept after an auth error")
				return nil
			}); !errors.As(err, &ae) {
				t.Fatalf("AllEvents: %v", err)
			}
			if n := srv.RequestCount(42); n != 2 {
				t.Fatalf("%d requests, want 2", n)
			}
		})
	}
	// Without a token the fake answers 401 as AWX does.
	srv := awxtest.NewServer(awxtest.Options{Token: testToken})
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/v2/jobs/42/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: status %d", resp.StatusCode)
	}
}

func TestNewClientRefusesBadTokenFiles(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	spaced := filepath.Join(dir, "spaced")
	os.WriteFile(empty, []byte(" \n"), 0o600)
	os.WriteFile(spaced, []byte("two words\n"), 0o600)
	missing := filepath.Join(dir, "missing")
	f := func(file, want string) {
		t.Helper()
		_, err := awx.NewClient(awx.Config{URL: "https://awx.example", TokenFile: file})
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--awx-token-file") {
			t.Fatalf("token file %q: %v, want an error naming --awx-token-file and %q", file, err, want)
		}
	}
	f(empty, empty)
	f(spaced, spaced)
	f(missing, missing)
	f("", "--awx-token-file")
	if _, err := awx.NewClient(awx.Config{URL: "awx.example", TokenFile: tokenFile(t, "x")}); err == nil || !strings.Contains(err.Error(), "--awx-url") {
		t.Fatalf("URL without scheme: %v", err)
	}
}

// sleeper records the waits Retry asks for, without waiting.
type sleeper struct{ waits []time.Duration }

func (s *sleeper) sleep(_ context.Context, d time.Duration) error {
	s.waits = append(s.waits, d)
	return nil
}

func TestClientRetriesWithBackoff(t *testing.T) {
	b := awx.Backoff{Base: time.Second, Max: 30 * time.Second}
	for _, tc := range []struct {
		name      string
		fault     awxtest.Fault
		failed    []int
		wantWaits []time.Duration
	}{
		{"503 then success", awxtest.Fault{Status: 503}, []int{1}, []time.Duration{time.Second}},
		{"three 502 double the wait", awxtest.Fault{Status: 502}, []int{1, 2, 3}, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}},
		{"429 Retry-After is honoured", awxtest.Fault{Status: 429, RetryAfter: "7"}, []int{1}, []time.Duration{7 * time.Second}},
		{"Retry-After is capped", awxtest.Fault{Status: 429, RetryAfter: "3600"}, []int{1}, []time.Duration{30 * time.Second}},
		{"a fault on the second page", awxtest.Fault{Status: 503}, []int{2}, []time.Duration{time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, c := newPair(t, awxtest.Options{}, awx.Config{PageSize: 20})
			srv.FailRequests(tc.fault, tc.failed...)
			var s sleeper
			all, err := c.AllEvents(context.Background(), 42, b, s.sleep)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(counters(all), seq(1, 32)) {
				t.Fatalf("counters %v", counters(all))
			}
			if !slices.Equal(s.waits, tc.wantWaits) {
				t.Fatalf("waits %v, want %v", s.waits, tc.wantWaits)
			}
			if n := srv.RequestCount(42); n != 2+len(tc.failed) {
				t.Fatalf("%d requests, want %d", n, 2+len(tc.failed))
			}
		})
	}
	// A single request reports the fault as retryable, with Retry-After.
	srv, c := newPair(t, awxtest.Options{}, awx.Config{})
	srv.FailRequests(awxtest.Fault{Status: 429, RetryAfter: "12"}, 1)
	_, err := c.Events(context.Background(), 42, 0)
	var re *awx.RetryableError
	if !errors.As(err, &re) || re.StatusCode != 429 || re.RetryAfter != 12*time.Second {
		t.Fatalf("err %v, want RetryableError 429 after 12s", err)
	}
}

func TestClientNetworkErrorIsRetryable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c, err := awx.NewClient(awx.Config{URL: url, TokenFile: tokenFile(t, testToken), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var s sleeper
	_, err = c.AllEvents(context.Background(), 42, awx.Backoff{Base: time.Second, Max: 4 * time.Second}, s.sleep)
	var re *awx.RetryableError
	if !errors.As(err, &re) || re.StatusCode != 0 {
		t.Fatalf("err %v, want a RetryableError without status", err)
	}
	want := []time.Duration{1, 2, 4, 4, 4, 4, 4}
	for i := range want {
		want[i] *= time.Second
	}
	if !slices.Equal(s.waits, want) {
		t.Fatalf("waits %v, want %v", s.waits, want)
	}
}

func TestClientBoundsPages(t *testing.T) {
	f := func(cfg awx.Config) {
		t.Helper()
		_, c := newPair(t, awxtest.Options{}, cfg)
		_, err := c.Events(context.Background(), 42, 0)
		if !errors.Is(err, awx.ErrTooLarge) {
			t.Fatalf("config %+v: %v, want ErrTooLarge", cfg, err)
		}
		var re *awx.RetryableError
		if errors.As(err, &re) {
			t.Fatal("a too large page must not be retryable")
		}
	}
	f(awx.Config{MaxPageBytes: 4 << 10})                 // 32 events are about 40 KiB
	f(awx.Config{MaxPageEvents: 31})                     // 32 events in one page
	f(awx.Config{PageSize: 10, MaxPageEvents: 9})        // the server sends what was asked
	f(awx.Config{MaxPageBytes: 16 << 10, PageSize: 100}) // a page, not the whole list
}

func TestBackoffDelay(t *testing.T) {
	b := awx.Backoff{Base: 2 * time.Second, Max: 60 * time.Second}
	f := func(failures int, retryAfter, want time.Duration) {
		t.Helper()
		if got := b.Delay(failures, retryAfter); got != want {
			t.Fatalf("Delay(%d, %v) = %v, want %v", failures, retryAfter, got, want)
		}
	}
	f(1, 0, 2*time.Second)
	f(2, 0, 4*time.Second)
	f(5, 0, 32*time.Second)
	f(6, 0, 60*time.Second)
	f(100, 0, 60*time.Second)
	f(1, 10*time.Second, 10*time.Second)
	f(5, 10*time.Second, 32*time.Second)
	f(1, time.Hour, 60*time.Second)
	jittered := awx.Backoff{Base: 10 * time.Second, Max: time.Minute, Jitter: func() float64 { return 0.5 }}
	if got := jittered.Delay(1, 0); got != 9*time.Second {
		t.Fatalf("jittered delay %v, want 9s", got)
	}
	if got := (awx.Backoff{}).Delay(1, 0); got != awx.DefaultBackoffBase {
		t.Fatalf("zero Backoff: %v", got)
	}
}

func TestClientBoundsRequestsInFlight(t *testing.T) {
	arrived := make(chan struct{}, 8)
	release := make(chan struct{})
	var inFlight, most atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		arrived <- struct{}{}
		<-release
		inFlight.Add(-1)
		w.Write([]byte(`{"id": 1, "status": "running"}`))
	}))
	defer srv.Close()
	c, err := awx.NewClient(awx.Config{URL: srv.URL, TokenFile: tokenFile(t, testToken), MaxInFlight: 2})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for range 2 {
		go func() { _, err := c.Job(context.Background(), 1); errs <- err }()
	}
	<-arrived
	<-arrived
	// Both slots are taken: a third request waits for one, and gives up
	// with its context without reaching the server.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.Job(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third request: %v, want the context's deadline", err)
	}
	close(release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if m := most.Load(); m != 2 || len(arrived) != 0 {
		t.Fatalf("%d requests in flight at most, %d more arrived; want 2 and none", m, len(arrived))
	}
}

// A token file others can read is used, with one warning naming the flag
// and the file, never the token; a private one gets no warning.
func TestClientWarnsOfAReadableTokenFile(t *testing.T) {
	f := func(mode os.FileMode, wantWarn bool) {
		t.Helper()
		file := tokenFile(t, testToken)
		if err := os.Chmod(file, mode); err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		if _, err := awx.NewClient(awx.Config{URL: "https://awx.example", TokenFile: file,
			Log: slog.New(slog.NewTextHandler(&logs, nil))}); err != nil {
			t.Fatal(err)
		}
		out := logs.String()
		warned := strings.Contains(out, "level=WARN") && strings.Contains(out, "--awx-token-file") && strings.Contains(out, file)
		if warned != wantWarn || strings.Contains(out, testToken) || strings.Count(out, "\n") > 1 {
			t.Errorf("mode %v: log %q, want a warning: %v", mode, out, wantWarn)
		}
	}
	f(0o600, false)
	f(0o400, false)
	f(0o640, true)
	f(0o644, true)
}

// An answer that is not JSON (a login page, a proxy's maintenance page
// sent with 200) says so and names --awx-url, and is retried as AWX not
// answering, not taken for a broken job.
func TestClientNonJSONAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<html><body>Sign in</body></html>"))
	}))
	defer srv.Close()
	c, err := awx.NewClient(awx.Config{URL: srv.URL, TokenFile: tokenFile(t, testToken)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Job(context.Background(), 42)
	var re *awx.RetryableError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "text/html") || !strings.Contains(err.Error(), "--awx-url") {
		t.Fatalf("err %v, want a retryable error naming the content type and --awx-url", err)
	}
	if _, err := c.Events(context.Background(), 42, 0); !errors.As(err, &re) {
		t.Fatalf("events: err %v, want retryable", err)
	}
}
