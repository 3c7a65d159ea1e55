package tsdb

import (
	"context"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
)

// TestQueryableSelectSorted: series created out of label order come back
// from Queryable in label order even when the caller (a PromQL engine)
// does not ask for sorting, as a remote engine's do.
func TestQueryableSelectSorted(t *testing.T) {
	s, err := Open(t.TempDir(), Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	app := s.Appendable().Appender(context.Background())
	for _, c := range []string{"3", "12", "7"} { // created in this order; label order is 12, 3, 7
		ls := labels.FromStrings(labels.MetricName, "peakline_memory_bytes", LabelJob, "j", LabelCounter, c)
		if _, err := app.Append(0, ls, 1000, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	q, err := s.Queryable().Querier(0, 2000)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	set := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchEqual, LabelJob, "j"))
	var got []string
	for set.Next() {
		got = append(got, set.At().Labels().Get(LabelCounter))
	}
	if err := set.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"12", "3", "7"}; !slices.Equal(got, want) {
		t.Fatalf("Select(sortSeries=false) counters = %v, want %v", got, want)
	}
}
