package tsdb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/peakline/peakline/tsdb/disktest"
)

// countJob counts the samples and task records of job id through q.
func countJob(q storage.Querier, id string) (int, error) {
	set := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchEqual, LabelJob, id))
	n := 0
	for set.Next() {
		it := set.At().Iterator(nil)
		for it.Next() != chunkenc.ValNone {
			n++
		}
		if it.Err() != nil {
			return n, it.Err()
		}
	}
	return n, set.Err()
}

// readJobCount opens a querier of s and counts job id in it.
func readJobCount(s *Store, id string) (int, error) {
	q, err := s.querier(minTime, maxTime)
	if err != nil {
		return 0, err
	}
	defer q.Close()
	return countJob(q, id)
}

// After a failed log write the store reopens itself at the first write
// once space is freed, with the metrics of a registry (registered again
// by the reopen) and readers running all along: a querier opened before
// holds the reopen off and reads what it did, a reader meanwhile gets
// ErrReopening or the acknowledged data, never anything else; the
// write that reopened and every later one are taken, and everything
// acknowledged is there after a restart.
func TestWALFailureReopensUnderReads(t *testing.T) {
	mnt := disktest.MountTmpfs(t, 64<<20)
	dir := filepath.Join(mnt, "data")
	clock := &fakeClock{now: testNow}
	opts := Options{Now: clock.Now, MinFreeDisk: -1}
	logs := &syncBuffer{}
	reg := prometheus.NewRegistry()
	s, err := Open(dir, opts, slog.New(slog.NewTextHandler(logs, nil)), reg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	filler := disktest.Fill(t, mnt, 4<<20)
	inOrder := func(i int) int64 { return testNow.Add(-2*time.Hour + time.Duration(i)*10*time.Second).UnixMilli() }
	w := &diskWriter{t: t, startMs: inOrder, acked: map[string]int{}}
	if err := w.untilRefused(s); !errors.Is(err, ErrLogUnsound) {
		t.Fatalf("write %d: %v, want %v", w.next-1, err, ErrLogUnsound)
	}
	ackedBefore := maps.Clone(w.acked)
	jobs := slices.Sorted(maps.Keys(ackedBefore))

	// Disk still full: the attempt fails for space, says how much is
	// missing, and the write is refused.
	clock.Advance(time.Minute)
	if err := w.write(s); !errors.Is(err, ErrLogUnsound) {
		t.Fatalf("write on a full disk: %v, want %v", err, ErrLogUnsound)
	}
	if l := logs.String(); !strings.Contains(l, "write-ahead log not reopened: too little free space") || !strings.Contains(l, "needed_bytes=") {
		t.Fatalf("no log of the refused reopen with the bytes needed:\n%s", l)
	}
	// Within relogInterval a write does not try again.
	if n := strings.Count(logs.String(), "not reopened"); n != 1 {
		t.Fatalf("%d reopen attempts logged, want 1", n)
	}
	if err := w.write(s); !errors.Is(err, ErrLogUnsound) {
		t.Fatalf("write on a full disk: %v, want %v", err, ErrLogUnsound)
	}
	if n := strings.Count(logs.String(), "not reopened"); n != 1 {
		t.Fatalf("%d reopen attempts logged within %v, want 1", n, relogInterval)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}

	// Readers run through the reopen.
	stop := make(chan struct{})
	var readers sync.WaitGroup
	var mu sync.Mutex
	var okReads, retryReads int
	var bad []string
	for r := range 4 {
		readers.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				job := jobs[(r+i)%len(jobs)]
				var err error
				var got int
				switch i % 3 {
				case 0:
					got, err = readJobCount(s, job)
					if err == nil && got != ackedBefore[job] {
						err = fmt.Errorf("job %s: %d samples and task records, %d acknowledged", job, got, ackedBefore[job])
					}
				case 1:
					var j *Job
					j, err = s.ReadJob(context.Background(), job, minTime, maxTime)
					if err == nil && j == nil {
						err = fmt.Errorf("job %s: no job and no error", job)
					}
				default:
					_, err = s.Spans(context.Background())
				}
				mu.Lock()
				switch {
				case err == nil:
					okReads++
				case errors.Is(err, ErrReopening):
					retryReads++
				default:
					bad = append(bad, err.Error())
				}
				mu.Unlock()
			}
		})
	}

	// A querier opened before the reopen holds it off.
	held, err := s.querier(minTime, maxTime)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	reopened := make(chan error, 1)
	go func() { reopened <- w.write(s) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := readJobCount(s, jobs[0])
		if errors.Is(err, ErrReopening) {
			break // the reopen is waiting for the held querier
		}
		if err != nil {
			t.Fatalf("read while the reopen starts: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("no read refused with ErrReopening within 10s of the reopening write")
		}
		runtime.Gosched()
	}
	for _, job := range jobs {
		if got, err := countJob(held, job); err != nil || got != ackedBefore[job] {
			t.Fatalf("held querier, job %s: %d, %v; want %d", job, got, err, ackedBefore[job])
		}
	}
	select {
	case err := <-reopened:
		t.Fatalf("the write returned (%v) while a querier held the old TSDB", err)
	default:
	}
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-reopened; err != nil {
		t.Fatalf("the write that reopened the store: %v, want it taken", err)
	}
	for range 10 {
		if err := w.write(s); err != nil {
			t.Fatalf("write %d after the reopen: %v", w.next-1, err)
		}
	}
	close(stop)
	readers.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d reads failed other than with ErrReopening, first: %s", len(bad), bad[0])
	}
	if okReads == 0 {
		t.Fatal("no read succeeded")
	}
	if !strings.Contains(logs.String(), "store reopened: writes are taken again") {
		t.Fatalf("no log of the reopen:\n%s", logs.String())
	}
	if st := s.WriteStatus(); st.Refusing {
		t.Fatalf("WriteStatus() = %+v after the reopen, want not refusing", st)
	}
	for job, want := range w.acked {
		if got := rawStoreSamples(t, s, job); got != want {
			t.Fatalf("job %s: %d samples and task records after the reopen, %d acknowledged", job, got, want)
		}
	}
	// The TSDB's metrics are registered by the reopened one.
	if mfs, err := reg.Gather(); err != nil {
		t.Fatalf("gather: %v", err)
	} else if !slices.ContainsFunc(mfs, func(m *dto.MetricFamily) bool { return m.GetName() == "prometheus_tsdb_head_series" }) {
		t.Fatal("prometheus_tsdb_head_series not registered after the reopen")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d reads taken, %d refused with ErrReopening; %d writes acknowledged before the failure, %d after",
		okReads, retryReads, len(ackedBefore), len(w.acked)-len(ackedBefore))
	s = checkAcked(t, dir, opts, w.acked)
	if d := s.Damage(); len(d.Logs) != 0 {
		t.Fatalf("the log the store repaired is corrupt at the restart: %+v", d.Logs)
	}
}
