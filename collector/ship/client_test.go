package ship

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"github.com/peakline/peakline/collector/ship/shiptest"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// ingestBody is the server's view of a batch.
type ingestBody = shiptest.Batch

// fakeIngest decodes batches as a server would and keeps them.
type fakeIngest struct {
	mu      sync.Mutex
	bodies  []ingestBody
	problem string
}

func (f *fakeIngest) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fail := func(code int, msg string) {
		f.mu.Lock()
		f.problem = msg
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
	}
	if r.Method != http.MethodPost || r.URL.Path != "/api/v1/ingest" {
		fail(http.StatusNotFound, "no route "+r.Method+" "+r.URL.Path)
		return
	}
	if r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Content-Encoding") != "gzip" {
		fail(http.StatusUnsupportedMediaType, "want gzip JSON")
		return
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		fail(http.StatusBadRequest, err.Error())
		return
	}
	dec := json.NewDecoder(zr)
	dec.DisallowUnknownFields() // nothing beyond the contract
	var b ingestBody
	if err := dec.Decode(&b); err != nil {
		fail(http.StatusBadRequest, "cannot decode batch: "+err.Error())
		return
	}
	if b.JobID == "" {
		fail(http.StatusBadRequest, `"job_id" is required`)
		return
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, b)
	f.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func TestClientSend(t *testing.T) {
	fake := &fakeIngest{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	job := readOne(t, realTree("runner-loops"))
	c := &Client{BaseURL: srv.URL + "/", HTTP: srv.Client()}
	batches := Batches(job, 25)
	for i := range batches {
		if err := c.Send(t.Context(), &batches[i]); err != nil {
			t.Fatalf("batch %d: %v (server: %s)", i, err, fake.problem)
		}
	}
	if len(fake.bodies) != len(batches) {
		t.Fatalf("server got %d batches, want %d", len(fake.bodies), len(batches))
	}
	first := fake.bodies[0]
	if len(first.Tasks) != len(job.Tasks) || first.LastEvent == nil || first.LastEvent.Counter != 32 {
		t.Errorf("first batch: %d tasks, last event %+v; want %d tasks, last event 32", len(first.Tasks), first.LastEvent, len(job.Tasks))
	}
	for i, tk := range first.Tasks {
		want := job.Tasks[i]
		if tk.Counter != want.Counter || tk.UUID != want.UUID || tk.Name != want.Name || tk.Start != want.StartMs {
			t.Errorf("task %d: got %+v, want %+v", i, tk, want)
		}
	}
	var got []rawPoint
	for _, b := range fake.bodies {
		for _, s := range b.Series {
			if len(s.T) != len(s.V) {
				t.Fatalf("series with %d times, %d values", len(s.T), len(s.V))
			}
			for k := range s.T {
				got = append(got, rawPoint{s.Resource, s.Counter, s.T[k], s.V[k]})
			}
		}
	}
	want := jobPoints(job)
	if len(got) != len(want) {
		t.Fatalf("server got %d samples, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("sample %d: server got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestClientSendErrors(t *testing.T) {
	fake := &fakeIngest{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	c := &Client{BaseURL: srv.URL, HTTP: srv.Client()}

	// The server's {"error": …} message and status come back.
	err := c.Send(t.Context(), &Batch{})
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusBadRequest || se.Message != `"job_id" is required` {
		t.Errorf("got %v, want a 400 StatusError with the server's message", err)
	}
	if err != nil && (!strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), `"job_id" is required`)) {
		t.Errorf("error %q does not carry the status and message", err)
	}

	// A body that is not the error envelope is the message.
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upstream is down", http.StatusBadGateway)
	}))
	defer plain.Close()
	err = (&Client{BaseURL: plain.URL}).Send(t.Context(), &Batch{JobID: "1"})
	if !errors.As(err, &se) || se.StatusCode != http.StatusBadGateway || se.Message != "upstream is down" {
		t.Errorf("got %v, want a 502 StatusError saying upstream is down", err)
	}

	// A cancelled context stops the send.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := c.Send(ctx, &Batch{JobID: "1"}); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

// SendPatiently retries what the server asks to retry, after its
// Retry-After, and nothing else.
func TestClientSendPatiently(t *testing.T) {
	f := func(name string, answers []int, patience time.Duration, wantRequests, wantRetries int, wantErr string) {
		t.Helper()
		var mu sync.Mutex
		n := 0
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			code := answers[min(n, len(answers)-1)]
			n++
			mu.Unlock()
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(code)
			_, _ = w.Write([]byte(`{"error":"x"}`))
		}))
		defer hs.Close()
		c := &Client{BaseURL: hs.URL}
		var waits []time.Duration
		err := c.SendPatiently(context.Background(), &Batch{JobID: "j"}, patience, func(_ error, w time.Duration) { waits = append(waits, w) })
		switch {
		case wantErr == "" && err != nil:
			t.Errorf("%s: %v, want success", name, err)
		case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
			t.Errorf("%s: error %v, want one containing %q", name, err, wantErr)
		}
		if n != wantRequests || len(waits) != wantRetries {
			t.Errorf("%s: %d requests and %d retries, want %d and %d", name, n, len(waits), wantRequests, wantRetries)
		}
		for _, w := range waits {
			if w != time.Second {
				t.Errorf("%s: waited %v, want the 1 s of Retry-After", name, w)
			}
		}
	}
	f("503 then ok", []int{503, 200}, time.Minute, 2, 1, "")
	f("400 is final", []int{400, 200}, time.Minute, 1, 0, "400 Bad Request")
	f("401 is final", []int{401, 200}, time.Minute, 1, 0, "401 Unauthorized")
	f("patience runs out", []int{429}, 1500*time.Millisecond, 2, 1, "still refused after 1.5s")
}
