package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/peakline/peakline/collector/awx"
	"github.com/peakline/peakline/collector/progress"
)

// awxFlags registers the flags of an AWX API client: --awx-url,
// --awx-token-file and --awx-ca-file.
func awxFlags(f *pflag.FlagSet, cfg *awx.Config) {
	f.StringVar(&cfg.URL, "awx-url", "", "base URL of the AWX API to read job events and metadata from, such as https://awx.example")
	f.StringVar(&cfg.TokenFile, "awx-token-file", "", "file holding a read-only AWX token for --awx-url (keep it mode 600)")
	f.StringVar(&cfg.CAFile, "awx-ca-file", "", "PEM CA bundle trusted for --awx-url's certificate, in addition to the system roots")
}

// fetchAWXJob reads the metadata and the events of AWX job jobFlag (the
// --job value) for the paths to import, before any tree is read, with a
// progress bar on stderr over the events. Errors name --awx-url or --job.
func fetchAWXJob(ctx context.Context, cfg awx.Config, jobFlag string, paths []string, stderr io.Writer, log *slog.Logger) (*awx.ImportedJob, error) {
	if jobFlag == "" {
		return nil, usageError("--job: --awx-url needs the AWX job id whose events to read, such as --job 42")
	}
	id, err := strconv.ParseInt(jobFlag, 10, 64)
	if err != nil || id <= 0 {
		return nil, usageError("--job: with --awx-url it must be an AWX job id, a positive number, got %q", jobFlag)
	}
	if len(paths) > 0 { // none: re-attribute the stored job (awx.Reattribute)
		if err := awx.CheckImportPaths(paths, awx.JobID(id), log); err != nil {
			return nil, err
		}
	}
	var bar *progress.Bar
	progress := func(read, total int) {
		if bar == nil {
			bar = newBar(stderr, total, fmt.Sprintf("reading the events of AWX job %d", id), "events")
		}
		bar.Set(read)
	}
	cfg.Log = log
	j, err := awx.FetchForImport(ctx, cfg, id, progress, log)
	if bar != nil {
		bar.Finish()
	}
	if err != nil {
		return nil, fmt.Errorf("--awx-url %s: %w", cfg.URL, err)
	}
	return j, nil
}
