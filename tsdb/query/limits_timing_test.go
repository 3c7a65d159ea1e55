package query_test

import (
	"context"
	"strings"
	"testing"

	"github.com/peakline/peakline/tsdb/query"
)

// BenchmarkQueryAtLimits measures the work before evaluation (size
// check, parse, translation) and format_query's prettifier on the largest
// queries the limits admit: the cost an anonymous request can ask for
// outside the engine's concurrency slots.
//
//	go test -run '^$' -bench QueryAtLimits -count 6 ./tsdb/query/ | tee new.txt; benchstat old.txt new.txt
func BenchmarkQueryAtLimits(b *testing.B) {
	store := openStore(b, testBase, testSeries()...)
	e := query.New(store.Queryable(), query.Options{})
	ctx := context.Background()
	shapes := []struct{ name, q string }{
		{"chain=1000", strings.Repeat("a+", 1000) + "a"},
		{"or=1000", strings.Repeat("a or ", 1000) + "a"},
		{"nest=200", strings.Repeat("abs(", 199) + "a" + strings.Repeat(")", 199)},
		{"matchers=3999", "a{" + strings.Repeat(`job_id!="x",`, 3998) + `job_id="1"}`},
	}
	for _, s := range shapes {
		b.Run("op=translate/shape="+s.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				out, err := e.Translate(ctx, s.q, testBase, testBase, 0)
				if err != nil || out == "" {
					b.Fatalf("%v %q", err, out)
				}
			}
		})
		b.Run("op=format/shape="+s.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				out, err := e.Format(ctx, s.q)
				if err != nil || out == "" {
					b.Fatalf("%v %q", err, out)
				}
			}
		})
	}
}
