package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/peakline/peakline/collector/ship"
	"github.com/peakline/peakline/tsdb/history"
)

// Exit codes of peakline regressions.
const (
	exitNoRegressions = 0
	exitRegressions   = 1
	exitUsage         = 2 // bad flags, no such template or run, server unreachable or refusing
)

// codedError is an error that ends the process with its own exit code;
// main prints it like any other.
type codedError struct {
	code int
	err  error
}

func (e codedError) Error() string { return e.err.Error() }
func (e codedError) Unwrap() error { return e.err }

func usageError(format string, args ...any) error {
	return codedError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// regressionsReport is the --json output of peakline regressions.
type regressionsReport struct {
	TemplateID   string             `json:"template_id"`
	TemplateName string             `json:"template_name"`
	JobID        string             `json:"job_id"`
	Runs         int                `json:"runs"` // in the window the job was compared with, itself included
	Regressions  []reportRegression `json:"regressions"`
	// Contended are the findings the task's stall explains (see
	// history.Rule): apart from the regressions, counted only with --strict.
	Contended []reportRegression `json:"contended"`
}

type reportRegression struct {
	Task string `json:"task"` // the task's key
	history.Regression
}

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
			tr, err := ship.NewTransport(tc, serverURL, logger)
			if err != nil {
				return codedError{code: exitUsage, err: err}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			h, err := fetchHistory(ctx, &http.Client{Transport: tr}, serverURL, template, job, last, maxStall)
			if err != nil {
				return codedError{code: exitUsage, err: err}
			}
			if len(h.Runs) == 0 {
				return usageError("--template: template %q has no runs on %s", template, serverURL)
			}
			rep := regressionsOf(h, h.Runs[len(h.Runs)-1].JobID)
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return codedError{code: exitUsage, err: err}
				}
			} else {
				printRegressions(out, rep)
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
func fetchHistory(ctx context.Context, client *http.Client, serverURL, template, job string, last int, maxStall float64) (*history.History, error) {
	q := url.Values{"last": {strconv.Itoa(last)}, "max_stall": {strconv.FormatFloat(maxStall, 'f', -1, 64)}}
	if job != "" {
		q.Set("job", job)
	}
	u := strings.TrimRight(serverURL, "/") + "/api/v1/templates/" + url.PathEscape(template) + "/history?" + q.Encode()
	body, err := getAPI(ctx, client, u)
	if err != nil {
		return nil, err
	}
	var h history.History
	if err := json.Unmarshal(body, &h); err != nil {
		return nil, fmt.Errorf("decode the answer of %s: %w", u, err)
	}
	if h.Runs == nil {
		return nil, errors.New("decode the answer of " + u + ": no \"runs\": is this a peakline serve?")
	}
	return &h, nil
}

// getAPI gets u from a peakline serve and returns the body of its 200
// answer (at most 256 MiB), or an error with the server's message.
func getAPI(ctx context.Context, client *http.Client, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("--server: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("ask %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("read the answer of %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(body))
		}
		return nil, fmt.Errorf("ask %s: server answered %s: %s", u, resp.Status, e.Error)
	}
	return body, nil
}

// regressionsOf collects the regressions of run jobID, in task order.
func regressionsOf(h *history.History, jobID string) regressionsReport {
	rep := regressionsReport{TemplateID: h.TemplateID, TemplateName: h.TemplateName, JobID: jobID, Runs: len(h.Runs),
		Regressions: []reportRegression{}, Contended: []reportRegression{}}
	for _, t := range h.Tasks {
		for _, r := range t.Regressions {
			switch {
			case r.JobID != jobID:
			case r.Contended:
				rep.Contended = append(rep.Contended, reportRegression{Task: t.Key, Regression: r})
			default:
				rep.Regressions = append(rep.Regressions, reportRegression{Task: t.Key, Regression: r})
			}
		}
	}
	return rep
}

// printRegressions writes the report as a table.
func printRegressions(w io.Writer, rep regressionsReport) {
	name := rep.TemplateID
	if rep.TemplateName != "" {
		name += " (" + rep.TemplateName + ")"
	}
	if len(rep.Regressions) == 0 && rep.Runs-1 < history.DefaultRule().MinOthers {
		// Exit 0 still: a template's first runs must not fail a pipeline,
		// but the table must not read as a judgement.
		fmt.Fprintf(w, "template %s, job %s: no regressions: too few runs to compare (%d other runs; a run needs %d)\n", name, rep.JobID, rep.Runs-1, history.DefaultRule().MinOthers)
		return
	}
	if len(rep.Regressions) == 0 {
		fmt.Fprintf(w, "template %s, job %s: no regressions against the other %d runs\n", name, rep.JobID, rep.Runs-1)
	} else {
		noun := "regressions"
		if len(rep.Regressions) == 1 {
			noun = "regression"
		}
		fmt.Fprintf(w, "template %s, job %s: %d %s against the other %d runs\n", name, rep.JobID, len(rep.Regressions), noun, rep.Runs-1)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TASK\tMETRIC\tVALUE\tUSUAL\tFACTOR")
		for _, r := range rep.Regressions {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Task, r.Metric, formatMetric(r.Metric, r.Value), formatMetric(r.Metric, r.Baseline), formatFactor(r.Factor))
		}
		_ = tw.Flush()
	}
	if len(rep.Contended) == 0 {
		return
	}
	fmt.Fprintf(w, "%d contended (the task waited for a CPU far more or less than usual: other work on the node; no regression without --strict)\n", len(rep.Contended))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tMETRIC\tVALUE\tUSUAL\tFACTOR\tWAITED\tUSUALLY")
	for _, r := range rep.Contended {
		waited, usually := "-", "-"
		if s := r.Stall; s != nil {
			waited = formatShare(s.Share) + " " + s.Signal
			usually = formatShare(s.Baseline)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Task, r.Metric, formatMetric(r.Metric, r.Value), formatMetric(r.Metric, r.Baseline), formatFactor(r.Factor), waited, usually)
	}
	_ = tw.Flush()
}

// formatFactor renders a finding's factor, "-" when the baseline is 0.
func formatFactor(f *float64) string {
	if f == nil {
		return "-"
	}
	return strconv.FormatFloat(*f, 'f', 2, 64) + "×"
}

// formatShare renders a share of wall time as a percentage.
func formatShare(v float64) string {
	return strconv.FormatFloat(v*100, 'f', 1, 64) + "%"
}

// formatMetric renders a metric's value in its unit for people.
func formatMetric(metric string, v float64) string {
	switch metric {
	case history.MetricDuration:
		return strconv.FormatFloat(v/1000, 'f', 1, 64) + " s"
	case history.MetricCPUSeconds:
		return strconv.FormatFloat(v, 'f', 1, 64) + " CPU s"
	case history.MetricCPUMax:
		return strconv.FormatFloat(v, 'f', 1, 64) + "%"
	case history.MetricMemoryMax:
		return strconv.FormatFloat(v/(1<<20), 'f', 1, 64) + " MiB"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}
