package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/peakline/peakline/collector/ship"
	"github.com/peakline/peakline/tsdb/history"
)

// rightsizeCommand wires `peakline rightsize`: flags, the server's
// GET /api/v1/templates/{id}/rightsize, and history's text or the
// answer's JSON or pod spec.
func rightsizeCommand() *cobra.Command {
	var (
		serverURL, template, format string
		asJSON                      bool
		last                        int
		limit                       byteSize
		timeout                     time.Duration
		tc                          ship.TransportConfig
	)
	cmd := &cobra.Command{
		Use:   "rightsize --server URL --template ID [--json] [--format text|json|pod-spec] [--last N] [--limit BYTES]",
		Short: "Print what a job template's runs say it should request: memory, CPU, forks, and the container group pod spec",
		Long: `rightsize asks the server what a job template's last runs say its
container group should request (GET /api/v1/templates/{id}/rightsize; the
rule: docs/rightsizing.md) and prints it: as text, as the server's JSON
(--json, --format json), or only the pod_spec_override YAML to paste into
the container group (--format pod-spec). --limit asks how many forks fit in
that much memory instead of in the recommended limit.

Exit codes: 0 printed; 2 usage error, a template with no finished run, or
the server could not be asked.`,
		Example: `  peakline rightsize --server http://127.0.0.1:8080 --template 7
  peakline rightsize --server http://127.0.0.1:8080 --template 7 --format pod-spec > pod-spec.yaml
  peakline rightsize --server https://peakline.example --token-file tok --template 7 --limit 2GiB --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if serverURL == "" {
				return usageError("--server: the URL of a peakline serve is required")
			}
			if template == "" {
				return usageError("--template: the job template id is required")
			}
			if asJSON {
				if cmd.Flags().Changed("format") && format != "json" {
					return usageError("--json: means --format json, but --format is %q", format)
				}
				format = "json"
			}
			if format != "text" && format != "json" && format != "pod-spec" {
				return usageError("--format: must be text, json or pod-spec, got %q", format)
			}
			if last < 1 || last > 100 {
				return usageError("--last: must be from 1 to 100 runs, got %d", last)
			}
			if limit < 0 {
				return usageError("--limit: must be a memory size (2GiB), got %d", limit)
			}
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			client, err := ship.NewClient(tc, serverURL, logger)
			if err != nil {
				return codedError{code: exitUsage, err: err}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			q := url.Values{"last": {strconv.Itoa(last)}}
			if limit > 0 {
				q.Set("limit", strconv.FormatInt(int64(limit), 10))
			}
			path := "/api/v1/templates/" + url.PathEscape(template) + "/rightsize"
			var rs history.RightSize
			if err := client.Get(ctx, path, q, &rs); err != nil {
				return codedError{code: exitUsage, err: fmt.Errorf("ask %s: %w", serverURL, err)}
			}
			if rs.Notes == nil {
				return codedError{code: exitUsage, err: fmt.Errorf("ask %s: GET %s: no \"notes\" in the answer: is this a peakline serve?", serverURL, path)}
			}
			if rs.RunsUsed == 0 {
				return usageError("--template: template %q has no finished run with memory samples on %s (%s)", template, serverURL, strings.Join(rs.Notes, "; "))
			}
			out := cmd.OutOrStdout()
			switch format {
			case "json":
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				err = enc.Encode(rs)
			case "pod-spec":
				_, err = fmt.Fprint(out, rs.PodSpecOverride)
			default:
				err = rs.WriteText(out)
			}
			if err != nil {
				return codedError{code: exitUsage, err: err}
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
	f.BoolVar(&asJSON, "json", false, "print the server's JSON (--format json)")
	f.StringVar(&format, "format", "text", "text, json, or pod-spec (the pod_spec_override YAML alone)")
	f.IntVar(&last, "last", 20, "runs of the template to read, newest last (1 to 100)")
	f.Var(&limit, "limit", "memory the forks must fit in (e.g. 2GiB; default: the recommended limit)")
	f.DurationVar(&timeout, "timeout", 30*time.Second, "give up on the server after this long")
	clientFlags(f, &tc)
	return cmd
}
