package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/peakline/peakline/collector/ship"
	"github.com/peakline/peakline/tsdb/history"
)

// Exit codes of peakline regressions; exitUsage (2, cli_usage.go) also
// for no such template or run, and a server unreachable or refusing.
const (
	exitNoRegressions = 0
	exitRegressions   = 1
)

func regressionsCommand() *cobra.Command {
	var (
		serverURL, template, job string
		last                     int
		asJSON, strict           bool
		maxStall                 float64
		timeout                  time.Duration
		tc                       ship.TransportConfig
	)
	cmd := &cobra.Command{
		Use:   "regressions --server URL --template ID [--job ID] [--json] [--last N] [--max-stall SHARE] [--strict]",
		Short: "Print the regressions of a template's newest (or given) run; exit 1 when there are any",
		Long: `regressions asks the server for the history of a job template
(GET /api/v1/templates/{id}/history) and prints the tasks whose duration,
CPU or memory in the newest run (or --job) stand out against the other
runs of the window (serve --regression-factor decides), as a table or
--json.

A duration or CPU finding of a task whose extra wait for a CPU took more
than --max-stall of the time it usually runs unstalled (other work on
the node slowed it; for CPU peaks also a run that waited that much less
than usual) is contended: printed apart with the stall figures, and no
regression unless --strict. Memory and process findings are never
contended. For CI pipelines, the exit code says:

  0  no regressions (contended findings alone included, without --strict)
  1  regressions (printed); with --strict, contended findings too
  2  usage error, unknown template or run, or the server could not be asked`,
		Example: `  peakline regressions --server http://127.0.0.1:8080 --template 7
  peakline regressions --server https://peakline.example --token-file tok --template 7 --job 1005 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if serverURL == "" {
				return usageError("--server: the URL of a peakline serve is required")
			}
			if template == "" {
				return usageError("--template: the job template id is required")
			}
			if last < 4 || last > 100 {
				return usageError("--last: must be from 4 to 100 runs (a run needs 3 others to be compared), got %d", last)
			}
			if !(maxStall >= 0 && maxStall <= 1) {
				return usageError("--max-stall: must be a share from 0 to 1 (0: judge no contention), got %v", maxStall)
			}
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			client, err := ship.NewClient(tc, serverURL, logger)
			if err != nil {
				return codedError{code: exitUsage, err: err}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			h, err := fetchHistory(ctx, client, template, job, last, maxStall)
			if err != nil {
				return codedError{code: exitUsage, err: err}
			}
			if len(h.Runs) == 0 {
				return usageError("--template: template %q has no runs on %s", template, serverURL)
			}
			rep := history.ReportOf(h, h.Runs[len(h.Runs)-1].JobID)
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return codedError{code: exitUsage, err: err}
				}
			} else {
				rep.Print(out)
			}
			if len(rep.Regressions) > 0 || (strict && len(rep.Contended) > 0) {
				return exitError{code: exitRegressions}
			}
			return nil
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return codedError{code: exitUsage, err: err}
	})
	f := cmd.Flags()
	f.StringVar(&serverURL, "server", "", "base URL of the peakline serve to ask")
	f.StringVar(&template, "template", "", "job template id")
	f.StringVar(&job, "job", "", "run (job id) to check (default: the template's newest run)")
	f.IntVar(&last, "last", 20, "runs of the window the run is compared in, itself included (the run and those before it; 4 to 100)")
	f.BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	f.Float64Var(&maxStall, "max-stall", history.DefaultMaxStall, "share (0 to 1) of the time a task usually runs unstalled that extra waiting for a CPU must take for a duration or CPU finding to be contended, not a regression; 0 judges none")
	f.BoolVar(&strict, "strict", false, "count contended findings as regressions (exit 1)")
	f.DurationVar(&timeout, "timeout", 30*time.Second, "give up on the server after this long")
	clientFlags(f, &tc)
	return cmd
}

// fetchHistory gets the history of template, the window ending at job
// when it is set.
func fetchHistory(ctx context.Context, client *ship.Client, template, job string, last int, maxStall float64) (*history.History, error) {
	q := url.Values{"last": {strconv.Itoa(last)}, "max_stall": {strconv.FormatFloat(maxStall, 'f', -1, 64)}}
	if job != "" {
		q.Set("job", job)
	}
	path := "/api/v1/templates/" + url.PathEscape(template) + "/history"
	var h history.History
	if err := client.Get(ctx, path, q, &h); err != nil {
		return nil, fmt.Errorf("ask %s: %w", client.BaseURL, err)
	}
	if h.Runs == nil {
		return nil, fmt.Errorf("ask %s: GET %s: no \"runs\" in the answer: is this a peakline serve?", client.BaseURL, path)
	}
	return &h, nil
}
