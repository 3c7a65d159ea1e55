package query

import (
	"fmt"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metricsql"
)

// The measure of a query counts what the parser will see once WITH
// templates are expanded, never less.
func TestMeasure(t *testing.T) {
	f := func(qs string, want size) {
		t.Helper()
		if got := measure(tokenize(qs)); got != want {
			t.Fatalf("%s: %+v, want %+v", qs, got, want)
		}
	}
	f(``, size{})
	f(`up`, size{tokens: 1})
	f(`1+1+1`, size{tokens: 5, ops: 2})
	f(`x{a="1", b=~"2"}`, size{tokens: 11, depth: 1})
	f(`max_over_time(rate(x[1m])[1h:15s])`, size{tokens: 14, depth: 3})
	f(`sum(x) and on(job) y # a comment with + - *`, size{tokens: 10, ops: 1, depth: 1})
	f(`"a+b(" + 'c{' + "+\"("`, size{tokens: 5, ops: 2})
	// A template used twice counts twice; its definition not at all.
	f(`WITH (a = x + y) a * a`, size{tokens: 10, ops: 3, depth: 1})
	f(`WITH (f(p) = abs(p)) f(x)`, size{tokens: 10, depth: 1})
}

// Templates that use each other twice double the query at each level:
// refused before the parser expands them.
func TestCheckSizeRefusesExpansion(t *testing.T) {
	chain := func(n int) string {
		var b strings.Builder
		b.WriteString("WITH (a0 = x")
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&b, ", a%d = a%d + a%d", i, i-1, i-1)
		}
		fmt.Fprintf(&b, ") a%d", n)
		return b.String()
	}
	if err := checkSize(chain(8)); err != nil {
		t.Fatalf("8 levels (255 operators): %v", err)
	}
	for _, n := range []int{10, 30, 200} {
		err := checkSize(chain(n))
		if err == nil || !strings.Contains(err.Error(), "over the limit of 1000") {
			t.Fatalf("%d levels: %v", n, err)
		}
	}
	if err := checkSize(strings.Repeat("abs(", 201) + "x" + strings.Repeat(")", 201)); err == nil || !strings.Contains(err.Error(), "201 deep") {
		t.Fatalf("201 nested calls: %v", err)
	}
	if err := checkSize(strings.Repeat("abs(", 200) + "x" + strings.Repeat(")", 200)); err != nil {
		t.Fatalf("200 nested calls: %v", err)
	}
}

// The measure of a query never counts fewer operators than the query
// MetricsQL expands it to.
func TestMeasureBoundsExpansion(t *testing.T) {
	for _, qs := range expansionSeeds {
		e, err := metricsql.Parse(qs)
		if err != nil {
			t.Fatalf("%s: %v", qs, err)
		}
		expanded := string(e.AppendString(nil))
		got, want := measure(tokenize(qs)), measure(tokenize(expanded))
		if got.ops < want.ops || want.ops == 0 {
			t.Fatalf("%s: %d operators, but it expands to %s with %d", qs, got.ops, expanded, want.ops)
		}
	}
}

// FuzzMeasureBoundsExpansion checks the same on any query MetricsQL
// parses within the size limits.
func FuzzMeasureBoundsExpansion(f *testing.F) {
	for _, qs := range expansionSeeds {
		f.Add(qs)
	}
	f.Fuzz(func(t *testing.T, qs string) {
		if checkSize(qs) != nil {
			return
		}
		e, err := metricsql.Parse(qs)
		if err != nil {
			return
		}
		expanded := string(e.AppendString(nil))
		if got, want := measure(tokenize(qs)), measure(tokenize(expanded)); got.ops < want.ops {
			t.Fatalf("%q: %d operators, but it expands to %q with %d", qs, got.ops, expanded, want.ops)
		}
	})
}

var expansionSeeds = []string{
	`WITH (a = x + y) a * a`,
	`WITH (f(p) = p + p, g(q) = f(q) - f(q)) g(x) / g(y)`,
	`WITH (a = x + y, b = WITH (c = a + a) c * c) b - b`,
	`WITH (sel = {job_id="1"}) sum(b{sel}) + sum(a{sel}) or c{sel}`,
	`WITH (a0 = x, a1 = a0 + a0, a2 = a1 + a1, a3 = a2 + a2) a3 unless a3`,
	`sum(rate(x[5m])) by (job) > bool 2 and on(job) up == 1`,
}
