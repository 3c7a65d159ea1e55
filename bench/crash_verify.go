package bench

// Reading a crash run's jobs back after a restart: raw samples and
// per-series counts and sums through the Prometheus API, per-task counts
// through the tasks API.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/peakline/peakline/tsdb"
)

// crashSeries names one series of a writer: task counter and resource.
type crashSeries struct {
	counter  int64
	resource string
}

// verifyCrash reads every writer's job back. Raw samples are read from
// verified[w] (everything when full) up to the last sample sent, each
// checked for presence, uniqueness and value; counts and sums over the
// whole job come from count_over_time and sum_over_time; the tasks API's
// per-task counts are checked for JSON jobs.
func verifyCrash(ctx context.Context, client *http.Client, base string, writers []*crashWriter, verified []int, full bool, res *CrashResult) error {
	res.Acked = 0
	for _, w := range writers {
		res.Acked += w.acked * len(tsdb.GraphedResources())
	}
	for wi, w := range writers {
		from := verified[wi]
		if full {
			from = 0
		}
		to := w.acked + w.pending // exclusive
		// Raw samples in [from, to), read one batch further so that a
		// sample that was never sent would show.
		present := map[crashSeries][]int{} // series -> sample indices read
		if end := to + w.cfg.BatchSamples; end > from {
			sel := fmt.Sprintf(`{job_id=%q,__name__=~"peakline_(cpu_percent|memory_bytes|pids)"}[%dms]`, w.job, end-from)
			rows, err := promQuery(ctx, client, base, sel, w.baseMs+int64(end-1))
			if err != nil {
				return err
			}
			for _, row := range rows {
				r := resourceOfMetric(row.metric["__name__"])
				counter, _ := strconv.ParseInt(row.metric[tsdb.LabelCounter], 10, 64)
				key := crashSeries{counter, r}
				for k, t := range row.t {
					i := int(t - w.baseMs)
					switch c, _, _ := w.crashTask(max(i, 0)); {
					case i < 0 || i >= to || c != counter:
						res.Phantoms++
						res.problem("%s %s counter %d: sample at %d was never sent", w.job, r, counter, t)
						continue
					case row.v[k] != crashValue(r, i):
						res.WrongValues++
						res.problem("%s %s sample %d: value %v, sent %v", w.job, r, i, row.v[k], crashValue(r, i))
					}
					present[key] = append(present[key], i)
				}
			}
		}
		// Per sample of the raw window: acknowledged ones once, in-doubt
		// ones at most once.
		inDoubtStored := map[crashSeries]int{}
		for _, r := range tsdb.GraphedResources() {
			seen := map[int]int{}
			for key, idx := range present {
				if key.resource == r.Name {
					for _, i := range idx {
						seen[i]++
					}
				}
			}
			for i := from; i < to; i++ {
				n := seen[i]
				if n > 1 {
					res.Duplicated += n - 1
					res.problem("%s %s sample %d read %d times", w.job, r.Name, i, n)
				}
				c, _, _ := w.crashTask(i)
				if i >= w.acked {
					if n > 0 {
						inDoubtStored[crashSeries{c, r.Name}]++
						res.InDoubtStored++
					} else {
						res.InDoubtDropped++
					}
					continue
				}
				if n == 0 {
					res.Lost++
					res.problem("%s %s sample %d (t=%d) acknowledged, not found", w.job, r.Name, i, w.baseMs+int64(i))
				}
			}
		}
		// Counts and sums of every series over the whole job, before the
		// raw window: they catch what happened to older samples.
		if from > 0 {
			want := map[crashSeries][2]float64{}
			for i := range from {
				c, _, _ := w.crashTask(i)
				for _, r := range tsdb.GraphedResources() {
					k := crashSeries{c, r.Name}
					v := want[k]
					v[0]++
					v[1] += crashValue(r.Name, i)
					want[k] = v
				}
			}
			// One resource per query: the functions drop the metric
			// name, which alone tells the resources' series apart.
			at := w.baseMs + int64(from-1)
			got := map[crashSeries][2]float64{}
			for _, r := range tsdb.GraphedResources() {
				for f, fn := range []string{"count_over_time", "sum_over_time"} {
					q := fmt.Sprintf(`%s(%s{job_id=%q}[%dms])`, fn, r.Metric, w.job, from)
					rows, err := promQuery(ctx, client, base, q, at)
					if err != nil {
						return err
					}
					for _, row := range rows {
						c, _ := strconv.ParseInt(row.metric[tsdb.LabelCounter], 10, 64)
						k := crashSeries{c, r.Name}
						v := got[k]
						v[f] = row.v[0]
						got[k] = v
					}
				}
			}
			for k, wv := range want {
				gv := got[k]
				switch {
				case gv[0] < wv[0]:
					res.Lost += int(wv[0] - gv[0])
					res.problem("%s %s counter %d: %v of %v older samples left", w.job, k.resource, k.counter, gv[0], wv[0])
				case gv[0] > wv[0]:
					res.Duplicated += int(gv[0] - wv[0])
					res.problem("%s %s counter %d: %v older samples read, %v sent", w.job, k.resource, k.counter, gv[0], wv[0])
				case gv[1] != wv[1]:
					res.WrongValues++
					res.problem("%s %s counter %d: older samples sum to %v, sent %v", w.job, k.resource, k.counter, gv[1], wv[1])
				}
			}
			for k := range got {
				if _, ok := want[k]; !ok {
					res.Phantoms++
					res.problem("%s: series %s counter %d was never sent", w.job, k.resource, k.counter)
				}
			}
		}
		if !w.remote {
			if err := verifyTasks(ctx, client, base, w, inDoubtStored, res); err != nil {
				return err
			}
		}
		// The next cycle reads raw from the start of the in-doubt batch:
		// whatever of it was stored is checked again from there.
		verified[wi] = w.acked
	}
	return nil
}

// verifyTasks compares the tasks API's per-task sample counts with the
// acknowledged samples plus the in-doubt ones found stored.
func verifyTasks(ctx context.Context, client *http.Client, base string, w *crashWriter, inDoubtStored map[crashSeries]int, res *CrashResult) error {
	var doc struct {
		Tasks []struct {
			Counter int64          `json:"counter"`
			Samples map[string]int `json:"samples"`
		} `json:"tasks"`
	}
	// A job with nothing left is not found: all its tasks are empty.
	if err := getJSON(ctx, client, base+"/api/v1/jobs/"+url.PathEscape(w.job)+"/tasks", &doc); err != nil && !errors.Is(err, errNotFound) {
		return err
	}
	want := map[crashSeries]int{}
	for i := range w.acked {
		c, _, _ := w.crashTask(i)
		for _, r := range tsdb.GraphedResources() {
			want[crashSeries{c, r.Name}]++
		}
	}
	for k, n := range inDoubtStored {
		want[k] += n
	}
	got := map[crashSeries]int{}
	for _, t := range doc.Tasks {
		for r, n := range t.Samples {
			got[crashSeries{t.Counter, r}] = n
		}
	}
	for k, n := range want {
		if got[k] != n {
			res.TaskMismatches++
			res.problem("%s tasks API: task %d %s has %d samples, want %d", w.job, k.counter, k.resource, got[k], n)
		}
	}
	for k, n := range got {
		if _, ok := want[k]; !ok && n != 0 {
			res.TaskMismatches++
			res.problem("%s tasks API: task %d %s has %d samples, none sent", w.job, k.counter, k.resource, n)
		}
	}
	return nil
}

func resourceOfMetric(metric string) string {
	for _, r := range tsdb.GraphedResources() {
		if r.Metric == metric {
			return r.Name
		}
	}
	return metric
}

// promRow is one series of a Prometheus API answer: a vector element has
// one (t, v), a matrix element all of its samples.
type promRow struct {
	metric map[string]string
	t      []int64
	v      []float64
}

// promQuery runs an instant query at atMs through the Prometheus API.
func promQuery(ctx context.Context, client *http.Client, base, q string, atMs int64) ([]promRow, error) {
	form := url.Values{"query": {q}, "time": {strconv.FormatFloat(float64(atMs)/1000, 'f', 3, 64)}}
	var doc struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  []json.Number     `json:"value"`
				Values [][]json.Number   `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := getJSON(ctx, client, base+"/prometheus/api/v1/query?"+form.Encode(), &doc); err != nil {
		return nil, err
	}
	if doc.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", q, doc.Error)
	}
	out := make([]promRow, 0, len(doc.Data.Result))
	for _, r := range doc.Data.Result {
		row := promRow{metric: r.Metric}
		pairs := r.Values
		if r.Value != nil {
			pairs = [][]json.Number{r.Value}
		}
		for _, p := range pairs {
			if len(p) != 2 {
				return nil, fmt.Errorf("query %s: a sample of %d fields", q, len(p))
			}
			t, err := parseMs(string(p[0]))
			if err != nil {
				return nil, fmt.Errorf("query %s: time %q: %w", q, p[0], err)
			}
			v, err := strconv.ParseFloat(string(p[1]), 64)
			if err != nil {
				return nil, fmt.Errorf("query %s: value %q: %w", q, p[1], err)
			}
			row.t, row.v = append(row.t, t), append(row.v, v)
		}
		out = append(out, row)
	}
	return out, nil
}

// parseMs reads a Prometheus API time ("1796009960.123") as unix ms
// without a float's rounding.
func parseMs(s string) (int64, error) {
	sec, frac, _ := strings.Cut(s, ".")
	ms, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return 0, err
	}
	frac = (frac + "000")[:3]
	f, err := strconv.ParseInt(frac, 10, 64)
	if err != nil {
		return 0, err
	}
	return ms*1000 + f, nil
}

var errNotFound = errors.New("404 not found")

func getJSON(ctx context.Context, client *http.Client, url string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode == http.StatusNotFound {
		return fmt.Errorf("GET %s: %w: %s", url, errNotFound, bytes.TrimSpace(body))
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d: %s", url, resp.StatusCode, bytes.TrimSpace(body))
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("GET %s: decode: %w", url, err)
	}
	return nil
}
