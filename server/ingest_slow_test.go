package server

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"
)

// slowClient is a raw connection that sends an ingest request's headers
// at once and then its body a byte at a time every tick, until the
// server answers. Its answer arrives on done.
type slowClient struct {
	done chan slowAnswer
}

type slowAnswer struct {
	code int
	body string
	err  error
}

// startSlow sends body to base's path as a client on a bad link would,
// stopping after stopAfter bytes (all of them when stopAfter < 0).
func startSlow(t *testing.T, base, path string, body []byte, stopAfter int) *slowClient {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, u.Host, len(body))
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	sent := 0
	if stopAfter > 0 {
		if _, err := conn.Write(body[:stopAfter]); err != nil {
			t.Fatal(err)
		}
		sent = stopAfter
	}
	c := &slowClient{done: make(chan slowAnswer, 1)}
	answered := make(chan struct{})
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for ; sent < len(body) && stopAfter < 0; sent++ {
			select {
			case <-answered:
				return
			case <-tick.C:
			}
			if _, err := conn.Write(body[sent : sent+1]); err != nil {
				return // the server answered and closed
			}
		}
	}()
	go func() {
		defer close(answered)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			c.done <- slowAnswer{err: err}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		c.done <- slowAnswer{code: resp.StatusCode, body: string(b)}
	}()
	return c
}

// waitReceiving spins until n ingest bodies are being received and they
// hold reserved bytes of the budget (any when reserved < 0).
func waitReceiving(s *Server, n int, reserved int64) {
	for s.bodies.receiving.Load() != int64(n) || reserved >= 0 && s.bodies.reserved.Load() != reserved {
		runtime.Gosched()
	}
}

// Slow clients do not hold ingest slots: with every slot's worth of
// clients (and more) trickling bodies a byte at a time, other ingests
// are served; each slow one ends with 408 once its body deadline passes,
// and gives back what it held.
func TestIngestSlowBodiesHoldNoSlot(t *testing.T) {
	const slow = 6
	s, hs, _ := newLimitServer(t, Config{MaxConcurrentIngest: 2, BodyReadTimeout: 2 * time.Second})
	body := sizedBatch(1, 1)
	var clients []*slowClient
	for range slow {
		clients = append(clients, startSlow(t, hs.URL, "/api/v1/ingest", body, -1))
	}
	// All of them are being received, unless one was answered first.
	for s.bodies.receiving.Load() != slow {
		for i, c := range clients {
			select {
			case a := <-c.done:
				t.Fatalf("slow client %d answered before its body was in: %d %q (%v)", i, a.code, a.body, a.err)
			default:
			}
		}
		runtime.Gosched()
	}
	for i := range 10 {
		code, got, _ := doPost(t, hs.URL+"/api/v1/ingest", bytes.NewReader(body), jsonHeader)
		want := `{"job_id":"sized","samples":0,"tasks":0,"duplicates":1,"conflicts":0}` + "\n" // sent again
		if i == 0 {
			want = `{"job_id":"sized","samples":1,"tasks":1,"duplicates":0,"conflicts":0}` + "\n"
		}
		if code != http.StatusOK || got != want {
			t.Fatalf("ingest %d while %d clients trickle bodies: %d %q, want 200 %q", i, slow, code, got, want)
		}
	}
	if n := s.bodies.receiving.Load(); n != slow {
		t.Fatalf("%d bodies being received after the fast ingests, want the %d slow ones (their deadline passed too early?)", n, slow)
	}
	for i, c := range clients {
		a := <-c.done
		want := `{"error":"body: not received within 2s (serve --ingest-body-timeout); send it faster or in smaller batches"}` + "\n"
		if a.err != nil || a.code != http.StatusRequestTimeout || a.body != want {
			t.Errorf("slow client %d: %d %q (%v), want 408 %q", i, a.code, a.body, a.err, want)
		}
	}
	waitReceiving(s, 0, 0)
	if len(s.ingests) != 0 {
		t.Errorf("%d ingest slots still held", len(s.ingests))
	}
}

// The bytes of bodies being received are bounded by
// --max-body-bytes-in-flight: a body that would pass it is refused with
// 429 and Retry-After while others hold it, and accepted once they are
// gone.
func TestIngestBodiesInFlightBounded(t *testing.T) {
	const budget = 64 << 10
	s, hs, _ := newLimitServer(t, Config{MaxBodyBytes: budget, MaxBodyBytesInFlight: budget, BodyReadTimeout: 2 * time.Second})
	// A 60 KiB body of which 40 KiB arrive: receiving it reserves its
	// chunks as they fill (512 B doubling, the last one cut at the
	// length), here all 61,440 bytes.
	stalled := append(sizedBatch(1, 1), bytes.Repeat([]byte(" "), 60<<10-len(sizedBatch(1, 1)))...)
	c := startSlow(t, hs.URL, "/api/v1/ingest", stalled, 40<<10)
	waitReceiving(s, 1, 60<<10)
	small := sizedBatch(1, 1)
	if code, got, _ := doPost(t, hs.URL+"/api/v1/ingest", bytes.NewReader(small), jsonHeader); code != http.StatusOK {
		t.Fatalf("a %d-byte ingest within the budget: %d %s, want 200", len(small), code, got)
	}
	padded := append(sizedBatch(1, 1), bytes.Repeat([]byte(" "), 5000-len(small))...)
	code, got, retry := doPost(t, hs.URL+"/api/v1/ingest", bytes.NewReader(padded), jsonHeader)
	want := `{"error":"too many requests: the ingest bodies being received would pass the 65536 bytes allowed at once (serve --max-body-bytes-in-flight); retry after 1 s"}` + "\n"
	if code != http.StatusTooManyRequests || retry != "1" || got != want {
		t.Fatalf("a 5000-byte ingest past the budget: %d (Retry-After %q) %q, want 429 (Retry-After 1) %q", code, retry, got, want)
	}
	if a := <-c.done; a.code != http.StatusRequestTimeout || !strings.Contains(a.body, "not received within 2s") {
		t.Fatalf("stalled client: %d %q (%v), want 408", a.code, a.body, a.err)
	}
	waitReceiving(s, 0, 0)
	if code, got, _ := doPost(t, hs.URL+"/api/v1/ingest", bytes.NewReader(padded), jsonHeader); code != http.StatusOK {
		t.Fatalf("the 5000-byte ingest once the budget is free: %d %s, want 200", code, got)
	}
}
