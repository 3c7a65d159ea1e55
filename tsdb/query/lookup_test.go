package query_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/peakline/peakline/tsdb/query"
)

// What a lookup returns stays readable after the block it came from is
// rewritten and unmapped: deleting a job compacts the store and removes
// the old block.
func TestLookupsOutliveTheirBlock(t *testing.T) {
	store := openStore(t, testBase, testSeries()...)
	ctx := context.Background()
	if err := store.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	e := query.New(store.Queryable(), query.Options{})
	all := query.Lookup{Start: testBase.Add(-time.Hour), End: testBase}
	names, _, err := e.LabelNames(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	jobs, _, err := e.LabelValues(ctx, "job_id", all)
	if err != nil {
		t.Fatal(err)
	}
	sel, err := query.ParseSelectors([]string{`{job_id="2"}`})
	if err != nil {
		t.Fatal(err)
	}
	series, _, err := e.Series(ctx, query.Lookup{Start: all.Start, End: all.End, Matchers: sel})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Instant(ctx, `b{job_id="2"}`, testBase)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()

	if err := store.Delete(ctx, "1"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names, ","); got != "__name__,counter,job_id" {
		t.Fatalf("label names after the block went: %q", got)
	}
	if got := strings.Join(jobs, ","); got != "1,2" {
		t.Fatalf("job ids after the block went: %q", got)
	}
	want := labels.FromStrings("__name__", "b", "job_id", "2", "counter", "4")
	if len(series) != 1 || !labels.Equal(series[0], want) {
		t.Fatalf("series after the block went: %v", series)
	}
	if got := res.Value.String(); got != `{__name__="b", counter="4", job_id="2"} => 62 @[1772366400000]` {
		t.Fatalf("query result after the block went: %s", got)
	}
}

// Lookups end with the caller's context and within the query timeout.
func TestLookupsEnd(t *testing.T) {
	store := openStore(t, testBase, testSeries()...)
	all := query.Lookup{Start: testBase.Add(-time.Hour), End: testBase}
	sel, err := query.ParseSelectors([]string{`{job_id="2"}`})
	if err != nil {
		t.Fatal(err)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	f := func(opts query.Options, ctx context.Context, want query.ErrorType) {
		t.Helper()
		e := query.New(store.Queryable(), opts)
		_, _, err := e.Series(ctx, query.Lookup{Start: all.Start, End: all.End, Matchers: sel})
		var qe *query.Error
		if !errors.As(err, &qe) || qe.Type != want {
			t.Fatalf("series: %v, want %s", err, want)
		}
		_, _, err = e.LabelValues(ctx, "job_id", all)
		if !errors.As(err, &qe) || qe.Type != want {
			t.Fatalf("label values: %v, want %s", err, want)
		}
	}
	f(query.Options{}, canceled, query.ErrCanceled)
	f(query.Options{Timeout: time.Nanosecond}, context.Background(), query.ErrTimeout)
}
