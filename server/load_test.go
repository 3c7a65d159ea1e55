package server_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/peakline/peakline/bench/workload"
)

// TestMixedLoad runs 50 clients against one server at once: JSON ingest,
// remote write, graph, tasks, the jobs list, delete and PromQL, while the
// store compacts underneath. Run under -race (make test does), it catches
// strings and chunks kept past their querier and data races on the
// store's state. No answer may be a 5xx or a broken connection, and at the
// end every job that was written and not deleted holds exactly the
// samples written, and every deleted job is gone.
func TestMixedLoad(t *testing.T) {
	const (
		clients  = 50
		requests = 24 // per client
		preload  = 100
	)
	hs, store := newTestServer(t)
	base := hs.URL

	// want holds the samples per resource of every job written and not
	// deleted; gone the deleted ones.
	var mu sync.Mutex
	want := map[string]*workload.Job{}
	gone := map[string]bool{}
	ids := []string{}
	for i := range preload {
		j := testJob(fmt.Sprintf("pre-%03d", i), 2, 8, int64(i))
		if code, body := post(t, base+"/api/v1/ingest", batchJSON(j), nil); code != http.StatusOK {
			t.Fatalf("preload %s: %d %s", j.ID, code, body)
		}
		want[j.ID] = j
		ids = append(ids, j.ID)
	}
	pick := func(r *rand.Rand) string {
		mu.Lock()
		defer mu.Unlock()
		return ids[r.IntN(len(ids))]
	}

	client := &http.Client{}
	do := func(method, u string, body []byte, ctype string) (int, string, error) {
		req, err := http.NewRequest(method, u, bytes.NewReader(body))
		if err != nil {
			return 0, "", err
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		if method == http.MethodDelete {
			req.Header.Set("X-Peakline-CSRF", "1")
		}
		if ctype == "application/x-protobuf" {
			req.Header.Set("Content-Encoding", "snappy")
			req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
		}
		for {
			resp, err := client.Do(req)
			if err != nil {
				return 0, "", err
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusTooManyRequests {
				return resp.StatusCode, string(b), err
			}
			// Past --max-concurrent-ingest: send again, as a collector
			// does (sooner than Retry-After, to keep the test short).
			time.Sleep(10 * time.Millisecond)
			if req, err = http.NewRequest(method, u, bytes.NewReader(body)); err != nil {
				return 0, "", err
			}
			req.Header = resp.Request.Header
		}
	}

	errs := make(chan error, clients*requests)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(c), 7))
			own := []string{} // jobs this client wrote and may delete
			for n := range requests {
				var (
					code int
					body string
					err  error
					ok   = map[int]bool{http.StatusOK: true}
					what string
				)
				switch op := r.IntN(10); op {
				case 0, 1: // JSON ingest of a new job
					j := testJob(fmt.Sprintf("c%02d-%02d", c, n), 1+r.IntN(3), 4+r.IntN(12), int64(c*1000+n))
					what = "ingest " + j.ID
					code, body, err = do(http.MethodPost, base+"/api/v1/ingest", batchJSON(j), "application/json")
					if err == nil && code == http.StatusOK {
						mu.Lock()
						want[j.ID] = j
						ids = append(ids, j.ID)
						mu.Unlock()
						own = append(own, j.ID)
					}
				case 2: // remote write of a new job
					j := testJob(fmt.Sprintf("rw%02d-%02d", c, n), 1+r.IntN(3), 4+r.IntN(12), int64(c*1000+n))
					what = "remote write " + j.ID
					ok = map[int]bool{http.StatusNoContent: true}
					code, body, err = do(http.MethodPost, base+"/api/v1/write", encodeWrite(t, jobWriteRequest(j)), "application/x-protobuf")
					if err == nil && code == http.StatusNoContent {
						mu.Lock()
						want[j.ID] = j
						ids = append(ids, j.ID)
						mu.Unlock()
						own = append(own, j.ID)
					}
				case 3: // delete one of its own jobs
					if len(own) == 0 {
						continue
					}
					k := r.IntN(len(own))
					id := own[k]
					own = append(own[:k], own[k+1:]...)
					mu.Lock()
					delete(want, id)
					gone[id] = true
					mu.Unlock()
					what = "delete " + id
					code, body, err = do(http.MethodDelete, base+"/api/v1/jobs/"+url.PathEscape(id), nil, "")
				case 4:
					what = "graph"
					ok[http.StatusNotFound] = true // deleted by another client meanwhile
					code, body, err = do(http.MethodGet, base+"/api/v1/jobs/"+url.PathEscape(pick(r))+"/graph?points=50", nil, "")
				case 5:
					what = "tasks"
					ok[http.StatusNotFound] = true
					code, body, err = do(http.MethodGet, base+"/api/v1/jobs/"+url.PathEscape(pick(r))+"/tasks", nil, "")
				case 6, 7:
					what = "jobs list"
					code, body, err = do(http.MethodGet, base+"/api/v1/jobs", nil, "")
				case 8:
					what = "query_range"
					end := time.Now().Unix()
					q := url.Values{"query": {`max by (task) (max_over_time(peakline_memory_bytes[1m]))`},
						"start": {fmt.Sprint(end - 900)}, "end": {fmt.Sprint(end)}, "step": {"15"}}
					code, body, err = do(http.MethodGet, base+"/prometheus/api/v1/query_range?"+q.Encode(), nil, "")
				case 9:
					what = "label values"
					code, body, err = do(http.MethodGet, base+"/prometheus/api/v1/label/job_id/values", nil, "")
				}
				if err != nil || !ok[code] {
					errs <- fmt.Errorf("client %d: %s: %d %v %.300s", c, what, code, err, body)
				}
			}
		}()
	}
	// Compactions while the clients run: they unmap the blocks that
	// strings and chunks kept past their querier would point into.
	stop := make(chan struct{})
	compacted := make(chan error, 1)
	go func() {
		var err error
		for {
			select {
			case <-stop:
				compacted <- err
				return
			default:
			}
			if e := store.Compact(context.Background()); e != nil && err == nil {
				err = e
			}
		}
	}()
	wg.Wait()
	close(stop)
	if err := <-compacted; err != nil {
		t.Errorf("compact during load: %v", err)
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// Every surviving job holds exactly what was written; deleted ones
	// are gone.
	for id, j := range want {
		var tasks struct {
			Tasks []taskDoc `json:"tasks"`
		}
		if code := getJSON(t, base+"/api/v1/jobs/"+url.PathEscape(id)+"/tasks", &tasks); code != http.StatusOK {
			t.Errorf("tasks of %s: %d", id, code)
			continue
		}
		got := map[string]int{}
		for _, tk := range tasks.Tasks {
			for res, n := range tk.Samples {
				got[res] += n
			}
		}
		wantN := map[string]int{}
		for _, s := range j.Series {
			wantN[s.Resource] += len(s.Ts)
		}
		if fmt.Sprint(got) != fmt.Sprint(wantN) {
			t.Errorf("job %s holds %v samples, want %v", id, got, wantN)
		}
	}
	for id := range gone {
		if code := getJSON(t, base+"/api/v1/jobs/"+url.PathEscape(id)+"/graph", nil); code != http.StatusNotFound {
			t.Errorf("graph of deleted job %s: %d, want 404", id, code)
		}
	}
}
