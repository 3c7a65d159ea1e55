package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/spf13/cobra"

	"github.com/peakline/peakline/tsdb"
)

// promEngine is the peer of the graph: the Prometheus promql engine with
// the options a Prometheus server runs with by default.
type promEngine struct{ ng *promql.Engine }

func newPromEngine() *promEngine {
	return &promEngine{ng: promql.NewEngine(promql.EngineOpts{
		Logger:        slog.New(slog.DiscardHandler),
		MaxSamples:    50_000_000,
		Timeout:       2 * time.Minute,
		LookbackDelta: 5 * time.Minute,
	})}
}

// rangeQuery evaluates g's query over store and encodes the matrix as the
// Prometheus HTTP API would, returning the JSON and the number of series
// and points.
func (e *promEngine) rangeQuery(ctx context.Context, store *tsdb.Store, g *graphJob) (body []byte, series, points int, err error) {
	q, err := e.ng.NewRangeQuery(ctx, store.Queryable(), nil, g.promQL,
		time.UnixMilli(g.firstMs), time.UnixMilli(g.lastMs), time.Duration(g.stepMs)*time.Millisecond)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("promql %s: %w", g.promQL, err)
	}
	defer q.Close()
	res := q.Exec(ctx)
	if res.Err != nil {
		return nil, 0, 0, fmt.Errorf("promql %s: %w", g.promQL, res.Err)
	}
	m, err := res.Matrix()
	if err != nil {
		return nil, 0, 0, err
	}
	body = encodeMatrix(m)
	for _, s := range m {
		points += len(s.Floats)
	}
	return body, len(m), points, nil
}

// encodeMatrix writes a matrix in the Prometheus API's JSON shape
// ({"status":"success","data":{"resultType":"matrix","result":[…]}}).
func encodeMatrix(m promql.Matrix) []byte {
	b := make([]byte, 0, 64+len(m)*256)
	b = append(b, `{"status":"success","data":{"resultType":"matrix","result":[`...)
	for i, s := range m {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"metric":{`...)
		first := true
		s.Metric.Range(func(l labels.Label) {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = strconv.AppendQuote(b, l.Name)
			b = append(b, ':')
			b = strconv.AppendQuote(b, l.Value)
		})
		b = append(b, `},"values":[`...)
		for k, p := range s.Floats {
			if k > 0 {
				b = append(b, ',')
			}
			b = append(b, '[')
			b = strconv.AppendFloat(b, float64(p.T)/1000, 'f', -1, 64)
			b = append(b, `,"`...)
			b = strconv.AppendFloat(b, p.F, 'f', -1, 64)
			b = append(b, `"]`...)
		}
		b = append(b, "]}"...)
	}
	return append(b, "]}}"...)
}

// promqlInProcess times one evaluation and encoding.
func (t *timed) promqlInProcess(ctx context.Context, e *promEngine, store *tsdb.Store, g *graphJob) error {
	start := time.Now()
	body, series, points, err := e.rangeQuery(ctx, store, g)
	t.d = append(t.d, time.Since(start))
	if err != nil {
		return err
	}
	if series == 0 || points == 0 {
		return fmt.Errorf("promql %s: empty result", g.promQL)
	}
	t.bytes = int64(len(body))
	return nil
}

// onceResult is what `bench graph-once` prints.
type onceResult struct {
	Open  time.Duration `json:"open_ns"`
	Query time.Duration `json:"query_ns"`
	Bytes int           `json:"bytes"`
}

// graphOnceCommand is the child of the cold-process variant: it opens the
// store, answers one graph or promql request and prints the timings.
func graphOnceCommand() *cobra.Command {
	var (
		g       graphJob
		subject string
		points  int
	)
	cmd := &cobra.Command{
		Use:    "graph-once",
		Short:  "Open a store and answer one graph or promql request (used by bench graph)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			start := time.Now()
			store, err := tsdb.Open(g.dir, tsdb.Options{}, nil, nil)
			if err != nil {
				return err
			}
			defer store.Close()
			var res onceResult
			res.Open = time.Since(start)
			full := g
			full.graphPath = fmt.Sprintf("/api/v1/jobs/%s/graph?points=%d", url.PathEscape(g.id), points)
			var t timed
			switch subject {
			case "peakline":
				h, _, err := graphHandlers(store)
				if err != nil {
					return err
				}
				err = t.graphInProcess(h, &full)
				if err != nil {
					return err
				}
			case "promql":
				if err := t.promqlInProcess(ctx, newPromEngine(), store, &full); err != nil {
					return err
				}
			default:
				return usagef("--subject: must be peakline or promql, got %q", subject)
			}
			res.Query, res.Bytes = t.d[0], int(t.bytes)
			return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
		},
	}
	f := cmd.Flags()
	f.StringVar(&g.dir, "data", "", "store directory")
	f.StringVar(&g.id, "job", "", "job id")
	f.StringVar(&subject, "subject", "peakline", "peakline or promql")
	f.IntVar(&points, "points", 1000, "graph points")
	f.StringVar(&g.promQL, "query", "", "PromQL range query")
	f.Int64Var(&g.firstMs, "start", 0, "query start, unix ms")
	f.Int64Var(&g.lastMs, "end", 0, "query end, unix ms")
	f.Int64Var(&g.stepMs, "step", 0, "query step, ms")
	return cmd
}

// runGraphOnce runs `<this binary> bench graph-once` for g and subject.
func runGraphOnce(ctx context.Context, g *graphJob, subject string, points int) (onceResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return onceResult{}, err
	}
	cmd := exec.CommandContext(ctx, exe, "bench", "graph-once", "--data", g.dir, "--job", g.id, "--subject", subject,
		"--points", strconv.Itoa(points), "--query", g.promQL, "--start", strconv.FormatInt(g.firstMs, 10),
		"--end", strconv.FormatInt(g.lastMs, 10), "--step", strconv.FormatInt(g.stepMs, 10))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return onceResult{}, fmt.Errorf("%s bench graph-once: %w: %s", exe, err, stderr.String())
	}
	var res onceResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		return onceResult{}, fmt.Errorf("%s bench graph-once printed %q: %w", exe, stdout.String(), err)
	}
	if res.Query <= 0 || math.IsNaN(float64(res.Query)) {
		return onceResult{}, fmt.Errorf("%s bench graph-once: no timing", exe)
	}
	return res, nil
}
