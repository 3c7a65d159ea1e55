// Package bench measures what Peakline costs next to its peers, side by
// side in the same run on the same data, and reports every figure as a
// ratio against the peer: `peakline bench downsample|graph|ingest|soak|series|crash`.
//
// It owns the runs, the peer processes it starts (a Prometheus server and
// VictoriaMetrics single-node on loopback with temp dirs, see peers.go),
// the report writers (tables, --json, --svg) and the shared workload
// generators (bench/workload). It does not own what it measures: the
// store, server and algorithms are tsdb, server and downsample, used here
// exactly as `peakline serve` uses them.
//
// Numbers on a shared machine are noisy; that is why each figure is taken
// against its peer in the same run, interleaved where possible, and the
// minimum or percentiles of several rounds are reported, never one shot.
package bench

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/peakline/peakline/bench/workload"
	"github.com/peakline/peakline/collector/progress"
)

// Command is `peakline bench` and its subcommands.
func Command() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure Peakline against its peers, side by side, and report the ratios",
		Long: `bench measures Peakline; downsample, graph, ingest and series run a peer
on the same data in the same run and report each figure next to the peer's,
with speedup = peer cost / Peakline cost (above 1 is better for Peakline),
while soak, crash and history check Peakline against its own targets:

  downsample  every algorithm vs github.com/dgryski/go-lttb: ns/point, allocations, fidelity
  graph       the graph endpoint vs the promql engine's query_range on the same store
  ingest      JSON ingest and remote write vs a Prometheus server and VictoriaMetrics
  soak        many live jobs over HTTP for minutes: lag, latency under load, RSS, lost samples
  series      series churn: head memory per series vs Prometheus and VictoriaMetrics
  crash       kill -9 of serve under ingest, restart, every acknowledged sample read back
  history     a template's history (20 runs × 200 tasks) from a warm store: latency against 100 ms

Each prints tables and shows progress on stderr; all but crash write --json FILE
and --svg FILE.
Prometheus and VictoriaMetrics are run from ./bin (make tools) or PATH.`,
		SilenceUsage: true,
	}
	cmd.AddCommand(downsampleCommand(), graphCommand(), graphOnceCommand(), ingestCommand(), soakCommand(), seriesCommand(), CrashCommand())
	cmd.AddCommand(historyCommand())
	return cmd
}

// common holds the flags every subcommand shares.
type common struct {
	jsonPath, svgPath string
	quick             bool
	seed              int64
	quiet             bool // no progress bars (tests)
}

func (c *common) register(f *pflag.FlagSet) {
	f.StringVar(&c.jsonPath, "json", "", "write the measurements to FILE as a JSON array")
	f.StringVar(&c.svgPath, "svg", "", "write a plot to FILE (SVG)")
	f.BoolVar(&c.quick, "quick", false, "a short run on small data (make bench)")
	f.Int64Var(&c.seed, "seed", 1, "seed of the generated workloads")
	f.BoolVar(&c.quiet, "no-progress", false, "do not draw progress bars")
}

// finish prints the report and writes its files.
func (c *common) finish(cmd *cobra.Command, r *Report, started time.Time) error {
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "# peakline bench %s\n# machine: %s\n# took %s\n\n", cmd.Name(), Machine(), time.Since(started).Round(time.Second))
	if err := r.WriteTable(w); err != nil {
		return err
	}
	return r.writeFiles(c.jsonPath, c.svgPath)
}

// ErrUsage marks the errors in a bench command's flags (errors.Is): the
// peakline binary exits 2 on them, as on every usage error.
var ErrUsage = errors.New("usage error")

// usageErr is an error in the flags: it is ErrUsage.
type usageErr struct{ error }

func (usageErr) Is(target error) bool { return target == ErrUsage }
func (e usageErr) Unwrap() error      { return e.error }

func usagef(format string, args ...any) error { return usageErr{fmt.Errorf(format, args...)} }

// bar reports progress over total steps on stderr (package progress: a
// bar on a terminal, plain lines elsewhere).
func (c *common) bar(cmd *cobra.Command, total int, what string) *progress.Bar {
	var w io.Writer = cmd.ErrOrStderr()
	if c.quiet {
		w = io.Discard
	}
	return progress.New(w, total, what, progress.Options{Unit: "steps"})
}

// parseSizes reads a comma-separated list of counts (1e3,1e6).
func parseSizes(flag, list string) ([]int, error) {
	var out []int
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		n, err := workload.ParseSize(s)
		if err != nil {
			return nil, usagef("--%s: %w", flag, err)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, usagef("--%s: give at least one count, e.g. 1e3,1e6", flag)
	}
	return out, nil
}
