package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	ptsdb "github.com/prometheus/prometheus/tsdb"
)

// backfillJob is the JSON batch of a three-task job starting at startMs,
// with n samples per resource.
func backfillJob(id string, startMs int64, n int) string {
	var series []string
	var tasks []string
	for k := range 3 {
		t0 := startMs + int64(k*n*1000)
		tasks = append(tasks, fmt.Sprintf(`{"counter":%d,"uuid":"u%d","name":"task %d","start":%d}`, 3+k, k, k, t0))
		for _, res := range []string{"cpu", "memory", "pids"} {
			var ts, vs []string
			for j := range n {
				ts = append(ts, fmt.Sprint(t0+int64(j*1000)+10))
				vs = append(vs, fmt.Sprint(100*k+j))
			}
			series = append(series, fmt.Sprintf(`{"resource":%q,"counter":%d,"uuid":"u%d","task":"task %d","t":[%s],"v":[%s]}`,
				res, 3+k, k, k, strings.Join(ts, ","), strings.Join(vs, ",")))
		}
	}
	return fmt.Sprintf(`{"job_id":%q,"tasks":[%s],"last_event":{"counter":20,"time":%d},"series":[%s]}`,
		id, strings.Join(tasks, ","), startMs+int64(3*n*1000), strings.Join(series, ","))
}

func postJSON(t *testing.T, url, body string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s: %s", url, resp.Status)
	}
}

// sigterm stops s and returns how long it took to exit.
func (s *served) sigterm(t *testing.T) time.Duration {
	t.Helper()
	start := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve exited with %v; stderr:\n%s", err, s.out.String())
		}
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
		t.Fatalf("serve did not exit within 10 s of SIGTERM; stderr:\n%s", s.out.String())
	}
	return time.Since(start)
}

// A server with 150 old jobs (2005-2025) and 5 recent ones deletes 100
// old ones; SIGTERM in the middle of the cleanup ends it within 10 s, the
// next start finishes the cleanup, the deleted jobs are gone from disk
// and the others intact, and the logs of both runs stay short.
func TestBackfillDeleteSigterm(t *testing.T) {
	dir := t.TempDir()
	s := serve(t, "--data", dir)
	const n = 20              // samples per resource and task
	want := map[string]bool{} // job -> kept
	first := time.Date(2005, 1, 1, 12, 0, 0, 0, time.UTC)
	for i := range 150 {
		id := fmt.Sprintf("old-%03d", i)
		postJSON(t, s.URL+"/api/v1/ingest", backfillJob(id, first.AddDate(0, 0, 50*i).UnixMilli(), n))
		want[id] = i%3 == 0
	}
	for i := range 5 {
		id := fmt.Sprintf("new-%d", i)
		postJSON(t, s.URL+"/api/v1/ingest", backfillJob(id, time.Now().Add(-time.Duration(10+i)*time.Minute).UnixMilli(), n))
		want[id] = true
	}
	for id, kept := range want {
		if kept {
			continue
		}
		req, _ := http.NewRequest(http.MethodDelete, s.URL+"/api/v1/jobs/"+id, nil)
		req.Header.Set("X-Peakline-CSRF", "1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("DELETE %s: %s", id, resp.Status)
		}
	}
	took := s.sigterm(t)
	firstLog := s.out.String()
	if !strings.Contains(firstLog, "cleanup of deleted jobs stopped by closing the store") {
		t.Fatalf("SIGTERM did not land in the cleanup pass; stderr:\n%s", firstLog)
	}
	t.Logf("exit %s after SIGTERM during the cleanup", took)

	s = serve(t, "--data", dir)
	deadline := time.Now().Add(60 * time.Second)
	for {
		// The log buffer is written by the process while it runs: the
		// gauge says when the cleanup is done.
		code, body := s.get(t, "/metrics")
		if code == 200 && strings.Contains(string(body), "\npeakline_delete_pending 0\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the resumed cleanup did not finish within 60 s (metrics %d)", code)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for id, kept := range want {
		code, _ := s.get(t, "/api/v1/jobs/"+id+"/graph")
		switch {
		case kept && code != 200:
			t.Fatalf("kept job %s: graph %d", id, code)
		case kept && s.rawSamples(t, id) != 9*n:
			t.Fatalf("kept job %s: %d samples, want %d", id, s.rawSamples(t, id), 9*n)
		case !kept && code != 404:
			t.Fatalf("deleted job %s: graph %d, want 404", id, code)
		}
	}
	s.sigterm(t)
	if !strings.Contains(s.out.String(), "removed deleted jobs") {
		t.Fatalf("the resumed cleanup logged no line; stderr:\n%s", s.out.String())
	}
	// Every request leaves its audit line; the rest must not grow with
	// the blocks.
	lines := 0
	for _, l := range strings.Split(firstLog+s.out.String(), "\n") {
		if l != "" && !strings.Contains(l, "msg=audit") {
			lines++
		}
	}
	if lines > 60 {
		t.Fatalf("%d log lines besides the audit over both runs, want at most 60:\n%s\n%s", lines, firstLog, s.out.String())
	}

	db, err := ptsdb.OpenDBReadOnly(dir, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q, err := db.Querier(0, time.Now().Add(time.Hour).UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	stored := map[string]int{}
	set := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchRegexp, "job_id", ".+"))
	for set.Next() {
		id := set.At().Labels().Get("job_id")
		it := set.At().Iterator(nil)
		for it.Next() != chunkenc.ValNone {
			stored[id]++
		}
	}
	if set.Err() != nil {
		t.Fatal(set.Err())
	}
	for id, kept := range want {
		if !kept && stored[id] != 0 {
			t.Fatalf("deleted job %s: %d samples on disk", id, stored[id])
		}
		if kept && stored[id] < 9*n {
			t.Fatalf("kept job %s: %d samples on disk, want at least %d", id, stored[id], 9*n)
		}
	}
}
