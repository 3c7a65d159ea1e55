package query_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/peakline/peakline/tsdb/query"
)

// parserCorpus reads the expressions of metricsql's own parser tests.
func parserCorpus(t testing.TB) []string {
	t.Helper()
	f, err := os.Open("testdata/metricsql_exprs.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := strconv.Unquote(line)
		if err != nil {
			t.Fatalf("corpus line %q: %v", line, err)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// corpusEngine is an engine over a small real store whose series carry
// the names and labels the corpus and the comparison cases use most.
func corpusEngine(t testing.TB) *query.Engine {
	store := openStore(t, testBase,
		labels.FromStrings("__name__", "foo", "bar", "baz", "job_id", "1"),
		labels.FromStrings("__name__", "bar", "foo", "x", "job_id", "2"),
		labels.FromStrings("__name__", "x", "le", "1", "y", "z"),
		labels.FromStrings("__name__", "peakline_cpu_percent", "job_id", "vm1", "counter", "1", "task_uuid", "u-1", "task", "t"),
		labels.FromStrings("__name__", "peakline_memory_bytes", "job_id", "vm1", "counter", "1", "task_uuid", "u-1", "task", "t"),
		labels.FromStrings("__name__", "peakline_test_requests_total", "job_id", "vm1", "code", "500"),
	)
	return query.New(store.Queryable(), query.Options{Timeout: 5 * time.Second})
}

// checkAnswer runs q as an instant query (step 0) or a range query: it
// must answer or fail with a *query.Error; a panic the engine caught
// (a runtime error) fails, and an unsupported function is bad_data
// naming a function.
func checkAnswer(t *testing.T, e *query.Engine, q string, step time.Duration) {
	t.Helper()
	var (
		res *query.Result
		err error
	)
	if step == 0 {
		res, err = e.Instant(context.Background(), q, testBase)
	} else {
		res, err = e.Range(context.Background(), q, testBase.Add(-5*time.Minute), testBase, step)
	}
	if err == nil {
		res.Close()
		return
	}
	var qe *query.Error
	if !errors.As(err, &qe) {
		t.Fatalf("%q (step %s): %T %v, want a *query.Error", q, step, err, err)
	}
	if strings.Contains(err.Error(), "runtime error") {
		t.Fatalf("%q (step %s): %v", q, step, err)
	}
	if errors.Is(err, query.ErrUnsupportedFunction) && (qe.Type != query.ErrBadData || !strings.Contains(err.Error(), `function "`)) {
		t.Fatalf("%q (step %s): %v (%s), want bad_data naming the function", q, step, err, qe.Type)
	}
}

// Every expression of metricsql's parser tests answers or is refused
// with a classified error, at an instant and over a range.
func TestParserCorpus(t *testing.T) {
	e := corpusEngine(t)
	for _, q := range parserCorpus(t) {
		checkAnswer(t, e, q, 0)
		checkAnswer(t, e, q, time.Minute)
	}
}

// FuzzMetricsQL mutates the parser tests' expressions and the queries
// compared with VictoriaMetrics; go test runs the seeds,
// `go test -fuzz FuzzMetricsQL ./tsdb/query/` explores.
func FuzzMetricsQL(f *testing.F) {
	for _, q := range parserCorpus(f) {
		f.Add(q)
	}
	for _, cs := range [][]vmCase{transformCases, aggregateCases, syntaxCases} {
		for _, c := range cs {
			f.Add(c.query)
		}
	}
	e := corpusEngine(f)
	f.Fuzz(func(t *testing.T, q string) {
		checkAnswer(t, e, q, 0)
	})
}
