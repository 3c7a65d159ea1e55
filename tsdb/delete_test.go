package tsdb

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	ptsdb "github.com/prometheus/prometheus/tsdb"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

var (
	recentMs = time.Now().Add(-10 * time.Minute).UnixMilli()
	oldMs    = time.Date(2019, 3, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	// Hours before oldMs, not years: the out-of-order compaction of the
	// cleanup writes one block per two hours of the out-of-order span.
	olderMs = oldMs - 5*3_600_000
)

// deleteFixture is what the delete tests store: three jobs to delete (one
// in the in-order head, one backfilled from 2019 through the out-of-order
// head, one with both) and two to keep.
func deleteFixture() map[string][]*Batch {
	return map[string][]*Batch{
		"keep-new": {exampleBatch("keep-new", recentMs+60_000)},
		"recent":   {exampleBatch("recent", recentMs)},
		"old":      {exampleBatch("old", oldMs)},
		"mixed":    {exampleBatch("mixed", recentMs+30_000), exampleBatch("mixed", oldMs+3_600_000)},
		"keep-old": {exampleBatch("keep-old", olderMs)},
	}
}

// appendFixture stores the fixture; the recent jobs first, so that the
// old ones go through the out-of-order head as backfills do.
func appendFixture(t *testing.T, s *Store, fx map[string][]*Batch) {
	t.Helper()
	for _, id := range []string{"keep-new", "recent", "mixed", "old", "keep-old"} {
		for _, b := range fx[id] {
			if _, err := s.Append(context.Background(), b); err != nil {
				t.Fatalf("append %s: %v", id, err)
			}
		}
	}
}

// sampleKey is one stored sample of a job, for exact comparisons.
type sampleKey struct {
	Resource string
	T        int64
	V        float64
}

// wantSamples is every sample the batches hold, sorted.
func wantSamples(batches []*Batch) []sampleKey {
	var out []sampleKey
	for _, b := range batches {
		for _, sd := range b.Series {
			for i, t := range sd.Ts {
				out = append(out, sampleKey{sd.Resource, t, sd.Vs[i]})
			}
		}
	}
	slices.SortFunc(out, cmpSample)
	return out
}

func cmpSample(a, b sampleKey) int {
	if c := strings.Compare(a.Resource, b.Resource); c != 0 {
		return c
	}
	return cmpInt64(a.T, b.T)
}

// rawCount is the number of samples the batches store: resource samples,
// task starts and the last event.
func rawCount(batches []*Batch) int {
	n := 0
	for _, b := range batches {
		n += len(wantSamples([]*Batch{b})) + len(b.Tasks) + 1
	}
	return n
}

// readSamples reads a whole job back through ReadJob.
func readSamples(t *testing.T, s *Store, id string) []sampleKey {
	t.Helper()
	job, err := s.ReadJob(context.Background(), id, minTime, maxTime)
	if err != nil {
		t.Fatalf("read job %s: %v", id, err)
	}
	var out []sampleKey
	for _, c := range job.Columns {
		for i, ts := range c.Ts {
			out = append(out, sampleKey{c.Resource.Name, ts, c.Vs[i]})
		}
	}
	slices.SortFunc(out, cmpSample)
	return out
}

// checkHidden fails unless id is invisible to every read of s.
func checkHidden(t *testing.T, s *Store, id string) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.ReadJob(ctx, id, minTime, maxTime); !errors.Is(err, ErrJobNotFound) {
		t.Fatalf("ReadJob(%s) = %v, want ErrJobNotFound", id, err)
	}
	if _, err := s.Summary(ctx, id); !errors.Is(err, ErrJobNotFound) {
		t.Fatalf("Summary(%s) = %v, want ErrJobNotFound", id, err)
	}
	ids, err := s.JobIDs(ctx)
	if err != nil || slices.Contains(ids, id) {
		t.Fatalf("JobIDs = %v, %v: holds deleted %s", ids, err, id)
	}
	sums, err := s.Summaries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, sum := range sums {
		if sum.ID == id {
			t.Fatalf("Summaries hold deleted %s", id)
		}
	}
	q, err := s.Queryable().Querier(minTime, maxTime)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	m := labels.MustNewMatcher(labels.MatchEqual, LabelJob, id)
	if set := q.Select(ctx, false, nil, m); set.Next() || set.Err() != nil {
		t.Fatalf("Queryable().Select(job_id=%q) found a series (err %v)", id, set.Err())
	}
	if vals, _, err := q.LabelValues(ctx, LabelJob, nil); err != nil || slices.Contains(vals, id) {
		t.Fatalf("Queryable().LabelValues(job_id) = %v, %v: holds deleted %s", vals, err, id)
	}
	if vals, _, err := q.LabelValues(ctx, LabelTask, nil, m); err != nil || len(vals) != 0 {
		t.Fatalf("Queryable().LabelValues(task, job_id=%q) = %v, %v, want none", id, vals, err)
	}
	if names, _, err := q.LabelNames(ctx, nil, m); err != nil || len(names) != 0 {
		t.Fatalf("Queryable().LabelNames(job_id=%q) = %v, %v, want none", id, names, err)
	}
}

// rawSamples counts the samples of a job in the TSDB itself, deletion
// records or not.
func rawSamples(t testing.TB, q storage.Querier, id string) int {
	t.Helper()
	set := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchEqual, LabelJob, id))
	n := 0
	for set.Next() {
		it := set.At().Iterator(nil)
		for it.Next() != chunkenc.ValNone {
			n++
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
	}
	if set.Err() != nil {
		t.Fatal(set.Err())
	}
	return n
}

func rawStoreSamples(t testing.TB, s *Store, id string) int {
	t.Helper()
	q, err := s.querier(minTime, maxTime)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	return rawSamples(t, q, id)
}

// blockSamples opens every block under dir (the store closed) with a
// fresh querier and counts the samples of each job in ids.
func blockSamples(t *testing.T, dir string, ids []string) (blocks int, counts map[string]int) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	counts = map[string]int{}
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(dir, e.Name(), "meta.json")); err != nil {
			continue
		}
		b, err := ptsdb.OpenBlock(nil, filepath.Join(dir, e.Name()), nil, nil)
		if err != nil {
			t.Fatalf("open block %s: %v", e.Name(), err)
		}
		q, err := ptsdb.NewBlockQuerier(b, minTime, maxTime)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			counts[id] += rawSamples(t, q, id)
		}
		_ = q.Close()
		_ = b.Close()
		blocks++
	}
	return blocks, counts
}

// A deleted job is hidden at once and, after the cleanup, stored nowhere:
// not in a block, not in the heads replayed after a restart, whether it
// was recent, backfilled from 2019 or both, deleted in either order, from
// the heads or from blocks.
func TestDeleteRemovesEverySample(t *testing.T) {
	f := func(order []string, compactFirst bool) {
		t.Helper()
		dir := t.TempDir()
		ctx := context.Background()
		s, err := Open(dir, Options{}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		fx := deleteFixture()
		appendFixture(t, s, fx)
		if compactFirst {
			if err := s.Compact(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range order {
			if err := s.Delete(ctx, id); err != nil {
				t.Fatalf("delete %s: %v", id, err)
			}
			checkHidden(t, s, id)
			if err := s.Delete(ctx, id); !errors.Is(err, ErrJobNotFound) {
				t.Fatalf("second delete of %s = %v, want ErrJobNotFound", id, err)
			}
			if err := s.WaitDeletes(ctx); err != nil {
				t.Fatal(err)
			}
			if n := rawStoreSamples(t, s, id); n != 0 {
				t.Fatalf("%s: %d samples left after its cleanup", id, n)
			}
		}
		// Moves whatever the heads still hold into blocks too.
		if err := s.Compact(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		all := []string{"recent", "old", "mixed", "keep-new", "keep-old"}
		blocks, counts := blockSamples(t, dir, all)
		if blocks == 0 {
			t.Fatal("no blocks on disk to check")
		}
		for _, id := range order {
			if counts[id] != 0 {
				t.Fatalf("%d samples of deleted job %s in the blocks on disk", counts[id], id)
			}
		}
		for _, id := range []string{"keep-new", "keep-old"} {
			if want := rawCount(fx[id]); counts[id] != want {
				t.Fatalf("blocks hold %d samples of %s, want %d", counts[id], id, want)
			}
		}
		// The WAL replay may bring back out-of-order chunks that
		// Prometheus had compacted before the delete: Open hides them and
		// deletes them again, and then they stay away.
		s, err = Open(dir, Options{}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range order {
			checkHidden(t, s, id)
		}
		if err := s.WaitDeletes(ctx); err != nil {
			t.Fatal(err)
		}
		for _, id := range order {
			if n := rawStoreSamples(t, s, id); n != 0 {
				t.Fatalf("%s: %d samples back after a restart", id, n)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s, err = Open(dir, Options{}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for _, id := range order {
			if n := rawStoreSamples(t, s, id); n != 0 || s.hidden(id) {
				t.Fatalf("%s: %d samples back after a second restart (hidden %v)", id, n, s.hidden(id))
			}
		}
		ids, err := s.JobIDs(ctx)
		if err != nil || !slices.Equal(ids, []string{"keep-new", "keep-old"}) {
			t.Fatalf("job ids after restart = %v, %v", ids, err)
		}
		for _, id := range ids {
			if got, want := readSamples(t, s, id), wantSamples(fx[id]); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s after deleting others: %d samples, want %d as stored", id, len(got), len(want))
			}
		}
	}
	f([]string{"recent", "old", "mixed"}, false)
	f([]string{"mixed", "old", "recent"}, false)
	f([]string{"old", "recent", "mixed"}, true)
	f([]string{"mixed", "recent", "old"}, true)
}

// A restart between a delete and its cleanup keeps the job hidden, and
// the cleanup resumes at the next Open. The pending jobs go in one pass.
func TestDeleteSurvivesRestartBeforeCleanup(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	hold := make(chan struct{})
	reg := prometheus.NewRegistry()
	s, err := Open(dir, Options{HoldDeletes: hold}, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	fx := deleteFixture()
	appendFixture(t, s, fx)
	// Into blocks first: after a restart with out-of-order samples still
	// in the write-behind log, the head spans back to 2019 and Prometheus
	// compacts it in steps of two hours, which takes minutes.
	if err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	deleted := []string{"mixed", "old", "recent"}
	for _, id := range deleted {
		if err := s.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range deleted {
		checkHidden(t, s, id)
		if got, want := rawStoreSamples(t, s, id), rawCount(fx[id]); got != want {
			t.Fatalf("%s: %d samples stored while the cleanup is held, want all %d", id, got, want)
		}
	}
	if got := testutil.ToFloat64(s.deletes.pending); got != 3 {
		t.Fatalf("peakline_delete_pending = %v, want 3", got)
	}
	// Remote write (labeled series) is refused too, so nothing slips in
	// behind the record.
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = s.AppendSeries(wctx, []LabeledSeries{{Labels: labels.FromStrings(labels.MetricName, MetricCPU, LabelJob, "old", LabelCounter, "3", LabelTaskUUID, "u", LabelTask, "t"), Ts: []int64{oldMs}, Vs: []float64{1}}})
	cancel()
	if !errors.Is(err, ErrDeletePending) {
		t.Fatalf("remote-write append to a pending job = %v, want ErrDeletePending", err)
	}
	if err := s.Close(); err != nil { // must not wait for the held cleanup
		t.Fatal(err)
	}

	// Reopened with the cleanup still held: the records hide the jobs.
	s, err = Open(dir, Options{HoldDeletes: hold}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range deleted {
		checkHidden(t, s, id)
		if rawStoreSamples(t, s, id) == 0 {
			t.Fatalf("%s: samples gone although the cleanup was held", id)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	reg = prometheus.NewRegistry()
	s, err = Open(dir, Options{}, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.WaitDeletes(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range deleted {
		if n := rawStoreSamples(t, s, id); n != 0 {
			t.Fatalf("%s: %d samples left after the resumed cleanup", id, n)
		}
	}
	if got := testutil.ToFloat64(s.deletes.deleted); got != 3 {
		t.Fatalf("peakline_deletes_total = %v, want 3", got)
	}
	if got := testutil.ToFloat64(s.deletes.pending); got != 0 {
		t.Fatalf("peakline_delete_pending = %v, want 0", got)
	}
	// What is left are the removed records, one per job.
	left, err := os.ReadDir(filepath.Join(dir, deletionsDir))
	if err != nil || len(left) != 3 {
		t.Fatalf("deletion records: %v %v, want 3", left, err)
	}
	for _, e := range left {
		data, err := os.ReadFile(filepath.Join(dir, deletionsDir, e.Name()))
		if err != nil || !strings.Contains(string(data), `"removed_ms":`) {
			t.Fatalf("record %s = %s, %v: not marked removed", e.Name(), data, err)
		}
	}
	for _, id := range []string{"keep-new", "keep-old"} {
		if got, want := readSamples(t, s, id), wantSamples(fx[id]); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: %d samples, want %d as stored", id, len(got), len(want))
		}
	}
}

// A write to a job being deleted waits for the cleanup (up to its
// context's deadline), then stores the job again, readable in full, also
// after a restart: no tombstone of the deletion hides it.
func TestReimportAfterDelete(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	hold := make(chan struct{})
	s, err := Open(dir, Options{HoldDeletes: hold}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	fx := deleteFixture()
	appendFixture(t, s, fx)
	if err := s.Delete(ctx, "nope"); !errors.Is(err, ErrJobNotFound) {
		t.Fatalf("delete of an unknown job = %v, want ErrJobNotFound", err)
	}
	for _, id := range []string{"mixed", "old"} {
		if err := s.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	expired, cancel := context.WithDeadline(ctx, time.Unix(0, 0))
	defer cancel()
	if _, err := s.Append(expired, fx["old"][0]); !errors.Is(err, ErrDeletePending) {
		t.Fatalf("append past its deadline to a pending job = %v, want ErrDeletePending", err)
	}
	type result struct {
		res AppendResult
		err error
	}
	done := make(chan result)
	go func() {
		var r result
		for _, b := range fx["mixed"] {
			res, err := s.Append(ctx, b)
			r.res.Samples += res.Samples
			if err != nil {
				r.err = err
			}
		}
		done <- r
	}()
	hold <- struct{}{} // one pass for both jobs
	r := <-done
	if r.err != nil || r.res.Samples != 144 {
		t.Fatalf("re-import of mixed = %+v, %v, want 144 new samples", r.res, r.err)
	}
	if _, err := s.Append(ctx, fx["old"][0]); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		for _, id := range []string{"mixed", "old", "keep-new", "keep-old", "recent"} {
			if got, want := readSamples(t, s, id), wantSamples(fx[id]); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s %s: %d samples, want %d", id, when, len(got), len(want))
			}
			job, err := s.ReadJob(ctx, id, minTime, maxTime)
			if err != nil || len(job.Tasks) != 3 || job.LastEvent == nil {
				t.Fatalf("%s %s: %v, tasks %d", id, when, err, len(job.Tasks))
			}
		}
	}
	check("after re-import")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	check("after re-import and restart")
	if err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	check("after re-import and compaction")
}

// Compact beside delete passes neither breaks a pass nor carries a
// deleted job into a block: its merge of the blocks waits for a pass over
// them, as Prometheus's own loop does. Without that, a merge closed the
// block a pass was rewriting (the process died of SIGSEGV in the index
// writer), or wrote a deleted job's samples into a new block after the
// pass had looked (TestMixedLoad served the deleted job's graph).
func TestCompactBesideDeletePass(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start int64
	}{
		{"recent (head)", recentMs},
		{"days old (backfill)", time.Now().Add(-72 * time.Hour).Truncate(24 * time.Hour).UnixMilli()},
	} {
		t.Run(tc.name, func(t *testing.T) { compactBesideDeletePass(t, tc.start) })
	}
}

func compactBesideDeletePass(t *testing.T, start int64) {
	s, _ := openTest(t)
	ctx := t.Context()
	const jobs = 40
	ids := make([]string, jobs)
	want := map[string][]sampleKey{}
	for i := range jobs {
		ids[i] = fmt.Sprintf("job-%02d", i)
		b := exampleBatch(ids[i], start+int64(i)*10_000)
		if _, err := s.Append(ctx, b); err != nil {
			t.Fatal(err)
		}
		want[ids[i]] = wantSamples([]*Batch{b})
	}
	stop := make(chan struct{})
	compacted := make(chan error)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				t.Logf("%d compactions beside the deletes", n)
				compacted <- nil
				return
			default:
			}
			// A write before each Compact gives it a block to merge
			// with the last one's.
			n++
			if _, err := s.Append(ctx, exampleBatch(fmt.Sprintf("extra-%03d", n), start+int64(n%jobs)*10_000+1)); err != nil {
				compacted <- err
				return
			}
			if err := s.Compact(ctx); err != nil {
				compacted <- err
				return
			}
		}
	}()
	for i := 0; i < jobs; i += 2 {
		if err := s.Delete(ctx, ids[i]); err != nil {
			t.Fatal(err)
		}
		if err := s.WaitDeletes(ctx); err != nil {
			t.Fatal(err)
		}
		if n := rawStoreSamples(t, s, ids[i]); n != 0 {
			t.Errorf("deleted job %s: %d samples in the store after its pass", ids[i], n)
		}
	}
	close(stop)
	if err := <-compacted; err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		if i%2 == 0 {
			if n := rawStoreSamples(t, s, id); n != 0 {
				t.Errorf("deleted job %s: %d samples in the store at the end", id, n)
			}
			continue
		}
		if got := readSamples(t, s, id); !reflect.DeepEqual(got, want[id]) {
			t.Errorf("kept job %s: %d samples, want %d as stored", id, len(got), len(want[id]))
		}
	}
}
