package tsdb

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// Summary describes one job for listings.
type Summary struct {
	ID      string
	FirstMs int64 // first sample or task start
	LastMs  int64 // last sample or job event
	Tasks   int
	Info    JobInfo // template, status, playbook (see JobInfo)
	// Per resource present, in Resources order.
	Resources []ResourceSummary
}

// ResourceSummary is the sample count and high-water mark of a resource,
// and the task the high-water mark was taken in (that of its first
// sample when the mark repeats).
type ResourceSummary struct {
	Resource Resource
	Samples  int
	PeakMs   int64
	Peak     float64
	// PeakCounter and PeakTask are the counter (0 when unknown) and name
	// of the peak's task; "" and 0 when the resource has no samples.
	PeakCounter int64
	PeakTask    string
}

// JobIDs lists the ids of every stored job, sorted.
func (s *Store) JobIDs(ctx context.Context) ([]string, error) {
	q, err := s.Queryable().Querier(minTime, maxTime) // hides deleted jobs
	if err != nil {
		return nil, fmt.Errorf("open querier: %w", err)
	}
	defer q.Close()
	ids, _, err := q.LabelValues(ctx, LabelJob, nil)
	if err != nil {
		return nil, fmt.Errorf("list job ids: %w", err)
	}
	// The values point into block memory that compaction unmaps once the
	// querier is closed: copy them.
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strings.Clone(id)
	}
	return out, nil
}

// Summaries returns a summary of every job. Summaries are cached per job
// and recomputed after the job changes.
func (s *Store) Summaries(ctx context.Context) ([]Summary, error) {
	ids, err := s.JobIDs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Summary, 0, len(ids))
	for _, id := range ids {
		sum, err := s.Summary(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, sum)
	}
	return out, nil
}

// Summary returns the summary of one job.
func (s *Store) Summary(ctx context.Context, jobID string) (Summary, error) {
	sum, gen, ok := s.cache.summary(jobID)
	if ok {
		return sum, nil
	}
	job, err := s.ReadJob(ctx, jobID, minTime, maxTime)
	if err != nil {
		return Summary{}, err
	}
	sum = Summarize(job)
	s.cache.putSummary(jobID, sum, gen)
	return sum, nil
}

// Summarize computes the summary of a job read in full.
func Summarize(job *Job) Summary {
	sum := Summary{ID: job.ID, Tasks: len(job.Tasks), Info: job.Info}
	sum.FirstMs, sum.LastMs = job.Span()
	for _, c := range job.Columns {
		rs := ResourceSummary{Resource: c.Resource, Samples: len(c.Ts), Peak: math.Inf(-1)}
		peakAt := -1
		for i, v := range c.Vs {
			if v > rs.Peak {
				rs.Peak, rs.PeakMs, peakAt = v, c.Ts[i], i
			}
		}
		if peakAt >= 0 {
			t := job.Tasks[c.Task[peakAt]]
			rs.PeakCounter, rs.PeakTask = t.Counter, t.Name
		}
		sum.Resources = append(sum.Resources, rs)
	}
	return sum
}

// Span is the first and last time the job shows, in unix ms: task starts
// and ends, its last event, its info samples, its first and last samples; 0, 0 for a job
// with none of them. It does not look at every sample.
func (job *Job) Span() (firstMs, lastMs int64) {
	firstMs, lastMs = math.MaxInt64, math.MinInt64
	for _, t := range job.Tasks {
		firstMs = min(firstMs, t.StartMs)
		lastMs = max(lastMs, t.EndMs)
	}
	if job.LastEvent != nil {
		lastMs = max(lastMs, job.LastEvent.TimeMs)
	}
	if job.InfoLastMs != 0 {
		firstMs = min(firstMs, job.InfoFirstMs)
		lastMs = max(lastMs, job.InfoLastMs)
	}
	for _, c := range job.Columns {
		if len(c.Ts) > 0 {
			firstMs = min(firstMs, c.Ts[0])
			lastMs = max(lastMs, c.Ts[len(c.Ts)-1])
		}
	}
	if firstMs == math.MaxInt64 {
		return 0, 0
	}
	return firstMs, lastMs
}

// TemplateJobs lists the ids of the jobs whose info names templateID as
// their template (the newest template_id of the job, see JobInfo),
// sorted. It asks the index for the jobs with any info sample of that
// template, then reads each one's info series alone (not its samples;
// cached until the job is written or deleted), so a job moved to another
// template later is left out. Safe for concurrent use.
func (s *Store) TemplateJobs(ctx context.Context, templateID string) ([]string, error) {
	// The token is taken before the querier opens: the querier sees the
	// store as of its opening, so info read through it may be cached
	// only if no write has dropped the job since then (a write committed
	// after the opening and before the lookup would leave its job's info
	// read empty and cached for good).
	tok := s.cache.generation()
	q, err := s.Queryable().Querier(minTime, maxTime) // hides deleted jobs
	if err != nil {
		return nil, fmt.Errorf("open querier: %w", err)
	}
	defer q.Close()
	isInfo := labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, MetricJobInfo)
	ids, _, err := q.LabelValues(ctx, LabelJob, nil, isInfo, labels.MustNewMatcher(labels.MatchEqual, LabelTemplateID, templateID))
	if err != nil {
		return nil, fmt.Errorf("list jobs of template %q: %w", templateID, err)
	}
	var out []string
	for _, id := range ids {
		info, err := s.cachedInfo(ctx, q, id, tok)
		if err != nil {
			return nil, err
		}
		if info.TemplateID == templateID {
			// Copied: the value points into block memory the querier holds.
			out = append(out, strings.Clone(id))
		}
	}
	slices.Sort(out)
	return out, nil
}

// JobInfos returns the info of each job of ids, in order (JobInfo{} for
// a job without any), read from the jobs' info series alone (not their
// samples) and cached until the job is written or deleted, as
// TemplateJobs does. Safe for concurrent use.
func (s *Store) JobInfos(ctx context.Context, ids []string) ([]JobInfo, error) {
	tok := s.cache.generation() // before the querier opens: see TemplateJobs
	q, err := s.Queryable().Querier(minTime, maxTime)
	if err != nil {
		return nil, fmt.Errorf("open querier: %w", err)
	}
	defer q.Close()
	out := make([]JobInfo, len(ids))
	for i, id := range ids {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if out[i], err = s.cachedInfo(ctx, q, id, tok); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// cachedInfo returns a job's info from the cache, or reads it through q
// and caches it under tok.
func (s *Store) cachedInfo(ctx context.Context, q storage.Querier, id string, tok uint64) (JobInfo, error) {
	if info, _, ok := s.cache.info(id); ok {
		return info, nil
	}
	info, err := readInfo(ctx, q, id)
	if err != nil {
		return JobInfo{}, err
	}
	s.cache.putInfo(strings.Clone(id), info, tok)
	return info, nil
}

// readInfo reads a job's info from its info series alone.
func readInfo(ctx context.Context, q storage.Querier, jobID string) (JobInfo, error) {
	var acc infoAcc
	set := q.Select(ctx, false, nil,
		labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, MetricJobInfo),
		labels.MustNewMatcher(labels.MatchEqual, LabelJob, jobID))
	for set.Next() {
		ls := set.At().Labels()
		it := set.At().Iterator(nil)
		for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
			if vt != chunkenc.ValFloat {
				continue
			}
			if t, v := it.At(); finite(v) {
				acc.add(ls, t, v) // copies the label values it keeps
			}
		}
		if err := it.Err(); err != nil {
			return JobInfo{}, fmt.Errorf("read info of job %q: %w", jobID, err)
		}
	}
	if err := set.Err(); err != nil {
		return JobInfo{}, fmt.Errorf("read info of job %q: %w", jobID, err)
	}
	return acc.info, nil
}

// TemplateIDs lists the template ids any job's info has named, sorted
// (a job moved to another template since may leave an id with no job:
// TemplateJobs tells). Safe for concurrent use.
func (s *Store) TemplateIDs(ctx context.Context) ([]string, error) {
	q, err := s.Queryable().Querier(minTime, maxTime) // hides deleted jobs
	if err != nil {
		return nil, fmt.Errorf("open querier: %w", err)
	}
	defer q.Close()
	ids, _, err := q.LabelValues(ctx, LabelTemplateID, nil, labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, MetricJobInfo))
	if err != nil {
		return nil, fmt.Errorf("list template ids: %w", err)
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strings.Clone(id) // the querier's memory goes when it closes
	}
	return out, nil
}
