package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/collector/awx"
)

// awxFlags registers the flags of an AWX API client: --awx-url,
// --awx-token-file and --awx-ca-file.
func awxFlags(f *pflag.FlagSet, cfg *awx.Config) {
	f.StringVar(&cfg.URL, "awx-url", "", "base URL of the AWX API to read job events and metadata from, such as https://awx.example")
	f.StringVar(&cfg.TokenFile, "awx-token-file", "", "file holding a read-only AWX token for --awx-url (keep it mode 600)")
	f.StringVar(&cfg.CAFile, "awx-ca-file", "", "PEM CA bundle trusted for --awx-url's certificate, in addition to the system roots")
}

// awxJob is what import --awx-url reads from AWX for the job it stores.
type awxJob struct {
	meta   awx.Job
	events []ansible.JobEvent
}

// fetchAWXJob reads the metadata and every event of AWX job jobFlag (the
// --job value) before any tree is read. Errors name --awx-url or --job.
func fetchAWXJob(ctx context.Context, cfg awx.Config, jobFlag string, log *slog.Logger) (*awxJob, error) {
	if jobFlag == "" {
		return nil, errors.New("--job: --awx-url needs the AWX job id whose events to read, such as --job 42")
	}
	id, err := strconv.ParseInt(jobFlag, 10, 64)
	if err != nil || id <= 0 {
		return nil, fmt.Errorf("--job: with --awx-url it must be an AWX job id, a positive number, got %q", jobFlag)
	}
	// A one-shot command gives up after seconds (0.25 + 0.5 + 1), not minutes.
	backoff := awx.Backoff{Base: 250 * time.Millisecond, Max: 5 * time.Second, Tries: 4}
	cfg.Log = log
	c, err := awx.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	var meta awx.Job
	err = awx.Retry(ctx, backoff, nil, func() (err error) {
		meta, err = c.Job(ctx, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("--awx-url %s: %w", cfg.URL, err)
	}
	if !meta.Final() {
		log.Warn("the AWX job is not finished; importing the events it has so far", "job", id, "status", meta.Status)
	}
	evs, err := c.AllEvents(ctx, id, backoff, nil)
	if err != nil {
		return nil, fmt.Errorf("--awx-url %s: %w", cfg.URL, err)
	}
	out := &awxJob{meta: meta, events: make([]ansible.JobEvent, len(evs))}
	for i, ev := range evs {
		out.events[i] = ev.JobEvent()
	}
	return out, nil
}

// setInfo makes the AWX job's metadata the job's info; the --template and
// --template-name flags still win, and what AWX does not say is kept.
func (a *awxJob) setInfo(j *ansible.Job, templateFlag, templateNameFlag string) {
	info := a.meta.Info()
	if templateFlag == "" && info.TemplateID != "" {
		j.Info.TemplateID = info.TemplateID
	}
	if templateNameFlag == "" && info.TemplateName != "" {
		j.Info.TemplateName = info.TemplateName
	}
	if info.Status != "" {
		j.Info.Status = info.Status
	}
	if info.Playbook != "" {
		j.Info.Playbook = info.Playbook
	}
}
