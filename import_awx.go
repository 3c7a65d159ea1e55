package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/schollz/progressbar/v3"
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
	id     int64 // --job, the AWX job id
	meta   awx.Job
	events []ansible.JobEvent // the ones attribution needs, see keptEvents
	total  int                // events AWX holds for the job
}

// fetchAWXJob reads the metadata and the events of AWX job jobFlag (the
// --job value) for the paths to import, before any tree is read (see
// checkAWXPaths), with a progress bar on stderr over the events. Errors
// name --awx-url or --job.
func fetchAWXJob(ctx context.Context, cfg awx.Config, jobFlag string, paths []string, stderr io.Writer, log *slog.Logger) (*awxJob, error) {
	if jobFlag == "" {
		return nil, errors.New("--job: --awx-url needs the AWX job id whose events to read, such as --job 42")
	}
	id, err := strconv.ParseInt(jobFlag, 10, 64)
	if err != nil || id <= 0 {
		return nil, fmt.Errorf("--job: with --awx-url it must be an AWX job id, a positive number, got %q", jobFlag)
	}
	if len(paths) > 0 { // none: re-attribute the stored job (reattr.go)
		if err := checkAWXPaths(paths, awx.JobID(id), log); err != nil {
			return nil, err
		}
	}
	// A one-shot command gives up after seconds (0.25 + 0.5 + 1), not minutes.
	backoff := awx.Backoff{Base: 250 * time.Millisecond, Max: 5 * time.Second, Tries: 4}
	cfg.Log = log
	c, err := awx.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	var meta awx.Job
	err = retryAWX(ctx, backoff, log, fmt.Sprintf("job %d", id), func() (err error) {
		meta, err = c.Job(ctx, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("--awx-url %s: %w", cfg.URL, err)
	}
	switch {
	case !meta.Final():
		log.Warn("the AWX job is not finished; importing the events it has so far", "job", id, "status", meta.Status)
	case !meta.EventProcessingFinished:
		// AWX saves a job's events seconds after they happen, and a busy
		// AWX minutes after the job ends (event_processing_finished).
		log.Warn("the AWX job is finished but AWX has not saved all its events yet; importing those it has", "job", id, "status", meta.Status)
	}
	out := &awxJob{id: id, meta: meta}
	var keep keptEvents
	var bar *progressbar.ProgressBar
	// Page by counter (counter__gt the last one read), not by the page
	// links: AWX answers each such page from its index, where a deep
	// ?page=N costs it an offset scan.
	for after := int64(0); ; {
		var p awx.Page
		err := retryAWX(ctx, backoff, log, fmt.Sprintf("events of job %d after counter %d", id, after), func() (err error) {
			p, err = c.Events(ctx, id, after)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("--awx-url %s: %w", cfg.URL, err)
		}
		if bar == nil {
			bar = newBar(stderr, p.Count, fmt.Sprintf("reading the events of AWX job %d", id))
			defer bar.Finish()
		}
		for _, ev := range p.Events {
			keep.add(ev.JobEvent())
			after = max(after, ev.Counter)
		}
		out.total += len(p.Events)
		_ = bar.Add(len(p.Events))
		if p.Next == "" || len(p.Events) == 0 {
			break
		}
	}
	out.events = keep.events()
	return out, nil
}

// keptEvents keeps of a job's events, given one at a time, those Read
// needs to attribute samples and describe the job: every task start, the
// newest event (the job's last event) and the oldest naming a playbook.
// Its memory grows with the tasks, not with the events (a job's hosts and
// loop items), so a job of a million events imports in little memory.
type keptEvents struct {
	starts   []ansible.JobEvent
	last     ansible.JobEvent
	playbook ansible.JobEvent
	any      bool
	// sizing holds the playbook_on_stats events (hosts) and the task
	// results killed by SIGKILL (OOM), at most maxSizingEvents.
	sizing []ansible.JobEvent
}

// maxSizingEvents bounds the stats and killed events import keeps.
const maxSizingEvents = 1000

func (k *keptEvents) add(ev ansible.JobEvent) {
	if ev.TaskStart {
		k.starts = append(k.starts, ev)
	}
	if !k.any || ev.Counter > k.last.Counter {
		k.last = ev
	}
	if ev.Playbook != "" && (k.playbook.Playbook == "" || ev.Counter < k.playbook.Counter) {
		k.playbook = ev
	}
	if (ev.Hosts > 0 || ev.Killed) && len(k.sizing) < maxSizingEvents {
		k.sizing = append(k.sizing, ev)
	}
	k.any = true
}

// events returns the kept events, each once, in counter order; a non-nil
// slice (Read's "events given") even when there were none.
func (k *keptEvents) events() []ansible.JobEvent {
	out := slices.Clone(k.starts)
	if out == nil {
		out = []ansible.JobEvent{}
	}
	var more []ansible.JobEvent
	if k.any {
		more = append(more, k.last)
	}
	if k.playbook.Playbook != "" {
		more = append(more, k.playbook)
	}
	more = append(more, k.sizing...)
	for _, ev := range more {
		if !slices.ContainsFunc(out, func(e ansible.JobEvent) bool { return e.Counter == ev.Counter }) {
			out = append(out, ev)
		}
	}
	slices.SortFunc(out, func(a, b ansible.JobEvent) int { return cmp.Compare(a.Counter, b.Counter) })
	return out
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
	// AWX's forks (its 0: ansible's 5), revision and EE are the job's.
	j.Info.Forks, j.Info.ProjectRevision, j.Info.EEImage = info.Forks, info.ProjectRevision, info.EEImage
}

// checkAWXPaths checks the paths of import --awx-url before AWX is asked:
// the events of one AWX job attribute the samples of one path. A runner
// tree's own job_events are not read: AWX's events are those of the job
// --job (jobID) names, which the user asked for. It warns about each such
// dir, so that a tree from another run than --job's shows up.
func checkAWXPaths(paths []string, jobID string, log *slog.Logger) error {
	if len(paths) > 1 {
		return fmt.Errorf("--awx-url: the events of AWX job %s attribute one job's samples, but %d paths were given; import them one by one", jobID, len(paths))
	}
	for _, pattern := range []string{"artifacts/*/job_events", "job_events"} {
		dirs, _ := filepath.Glob(filepath.Join(paths[0], pattern))
		for _, d := range dirs {
			log.Warn("import --awx-url: the tree's own job events are not read; AWX job "+jobID+"'s events attribute its samples", "ignored", d)
		}
	}
	return nil
}

// spanSlack is how far outside the span of its AWX job's events a sample
// may lie and still count as the job's: collection starts before the
// first event and a poll closes after the last.
const spanSlack = 5 * time.Second

// checkSpan warns when none of the job's samples lies within the span of
// the AWX job's events (give or take spanSlack): the samples then come from
// another run than --job names, and every one would go to its first or
// last task.
func (a *awxJob) checkSpan(j *ansible.Job, log *slog.Logger) {
	if msg := a.spanMessage(j); msg != "" { // reattr.go
		log.Warn(msg, "job", j.ID)
	}
}

// retryAWX is awx.Retry with a warning before each new try, naming the
// request and the error: a one-shot command that waits for AWX (up to the
// client's timeout a try) says so.
func retryAWX(ctx context.Context, b awx.Backoff, log *slog.Logger, what string, do func() error) error {
	var last error
	tries := 1
	sleep := func(ctx context.Context, d time.Duration) error {
		tries++
		log.Warn("import --awx-url: AWX failed; asking again", "request", what, "try", tries, "of", b.Tries, "wait", d, "err", last)
		return awx.Sleep(ctx, d)
	}
	return awx.Retry(ctx, b, sleep, func() error {
		last = do()
		return last
	})
}
