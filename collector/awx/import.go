package awx

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"time"

	"github.com/peakline/peakline/collector/ansible"
)

// ImportedJob is what import --awx-url reads from AWX for the job it
// stores: its metadata and the events that attribute its samples.
type ImportedJob struct {
	ID     int64 // the AWX job id
	Meta   Job
	Events []ansible.JobEvent // the ones attribution needs, see keptEvents
	Total  int                // events AWX holds for the job
}

// FetchForImport reads the metadata and the events of AWX job id, with
// the patience of a one-shot command (a few tries over seconds, each
// retry warned about). progress, when set, hears of the events read so
// far and the job's total after each page.
func FetchForImport(ctx context.Context, cfg Config, id int64, progress func(read, total int), log *slog.Logger) (*ImportedJob, error) {
	// A one-shot command gives up after seconds (0.25 + 0.5 + 1), not minutes.
	backoff := Backoff{Base: 250 * time.Millisecond, Max: 5 * time.Second, Tries: 4}
	cfg.Log = log
	c, err := NewClient(cfg)
	if err != nil {
		return nil, err
	}
	var meta Job
	err = retryAWX(ctx, backoff, log, fmt.Sprintf("job %d", id), func() (err error) {
		meta, err = c.Job(ctx, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	switch {
	case !meta.Final():
		log.Warn("the AWX job is not finished; importing the events it has so far", "job", id, "status", meta.Status)
	case !meta.EventProcessingFinished:
		// AWX saves a job's events seconds after they happen, and a busy
		// AWX minutes after the job ends (event_processing_finished).
		log.Warn("the AWX job is finished but AWX has not saved all its events yet; importing those it has", "job", id, "status", meta.Status)
	}
	out := &ImportedJob{ID: id, Meta: meta}
	var keep keptEvents
	// Page by counter (counter__gt the last one read), not by the page
	// links: AWX answers each such page from its index, where a deep
	// ?page=N costs it an offset scan.
	for after := int64(0); ; {
		var p Page
		err := retryAWX(ctx, backoff, log, fmt.Sprintf("events of job %d after counter %d", id, after), func() (err error) {
			p, err = c.Events(ctx, id, after)
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, ev := range p.Events {
			keep.add(ev.JobEvent())
			after = max(after, ev.Counter)
		}
		out.Total += len(p.Events)
		if progress != nil {
			progress(out.Total, p.Count)
		}
		if p.Next == "" || len(p.Events) == 0 {
			break
		}
	}
	out.Events = keep.events()
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

// SetInfo makes the AWX job's metadata j's info; what AWX does not say
// is kept, and so are j's template id and name when keepTemplate and
// keepTemplateName (given by the user: import --template, --template-name).
func (a *ImportedJob) SetInfo(j *ansible.Job, keepTemplate, keepTemplateName bool) {
	info := a.Meta.Info()
	if !keepTemplate && info.TemplateID != "" {
		j.Info.TemplateID = info.TemplateID
	}
	if !keepTemplateName && info.TemplateName != "" {
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

// CheckImportPaths checks the paths of import --awx-url before AWX is asked:
// the events of one AWX job attribute the samples of one path. A runner
// tree's own job_events are not read: AWX's events are those of the job
// --job (jobID) names, which the user asked for. It warns about each such
// dir, so that a tree from another run than --job's shows up.
func CheckImportPaths(paths []string, jobID string, log *slog.Logger) error {
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

// SpanSlack is how far outside the span of its AWX job's events a sample
// may lie and still count as the job's: collection starts before the
// first event and a poll closes after the last.
const SpanSlack = 5 * time.Second

// SpanMessage says why none of j's samples lies within the span of the
// AWX job's events (give or take SpanSlack): the samples then come from
// another run than the AWX job, and every one would go to its first or
// last task. "" when one does or j has no samples or AWX no events.
func (a *ImportedJob) SpanMessage(j *ansible.Job) string {
	if len(a.Events) == 0 {
		return ""
	}
	from, to := a.Events[0].TimeMs, a.Events[0].TimeMs
	for _, ev := range a.Events {
		from, to = min(from, ev.TimeMs), max(to, ev.TimeMs)
	}
	lo, hi := from-SpanSlack.Milliseconds(), to+SpanSlack.Milliseconds()
	n := 0
	for _, s := range j.Series {
		for _, t := range s.Ts {
			if t >= lo && t <= hi {
				return ""
			}
		}
		n += len(s.Ts)
	}
	if n == 0 {
		return ""
	}
	stamp := func(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }
	return fmt.Sprintf("import --awx-url: none of the %d samples lies within the events of AWX job %d (%s .. %s, give or take %s): is --job the job that made them?",
		n, a.Meta.ID, stamp(from), stamp(to), SpanSlack)
}

// retryAWX is Retry with a warning before each new try, naming the
// request and the error: a one-shot command that waits for AWX (up to the
// client's timeout a try) says so.
func retryAWX(ctx context.Context, b Backoff, log *slog.Logger, what string, do func() error) error {
	var last error
	tries := 1
	sleep := func(ctx context.Context, d time.Duration) error {
		tries++
		log.Warn("import --awx-url: AWX failed; asking again", "request", what, "try", tries, "of", b.Tries, "wait", d, "err", last)
		return Sleep(ctx, d)
	}
	return Retry(ctx, b, sleep, func() error {
		last = do()
		return last
	})
}
