package ship

import "github.com/peakline/peakline/collector/ansible"

// DefaultBatchSamples is the most samples Batches puts in one batch
// when asked for no limit.
const DefaultBatchSamples = 50_000

// MaxBatchSeries and MaxBatchTasks are the most series and task records
// Batches puts in one batch: half the server's defaults
// (serve --max-batch-series and --max-batch-tasks, 10,000 each), so a
// job with thousands of tasks imports as several batches, not a 413.
const (
	MaxBatchSeries = 5_000
	MaxBatchTasks  = 5_000
)

// Samples returns the number of samples in b.
func (b *Batch) Samples() int {
	n := 0
	for i := range b.Series {
		n += len(b.Series[i].Ts)
	}
	return n
}

// Batches splits job j into ingest batches of at most maxSamples samples each
// (DefaultBatchSamples when maxSamples <= 0), MaxBatchSeries series and
// MaxBatchTasks task records, splitting a long series across batches in
// time order. The tasks come first (the first batch also carries the last
// event and the job's info), so the server knows every task before its samples arrive; a job
// without samples or tasks is one batch. The batches share j's slices:
// don't modify j while they are in use.
func Batches(j *ansible.Job, maxSamples int) []Batch {
	if maxSamples <= 0 {
		maxSamples = DefaultBatchSamples
	}
	out := []Batch{{JobID: j.ID, LastEvent: EventOf(j.LastEvent), JobInfo: InfoOf(j.Info)}}
	tasks := TasksOf(j.Tasks)
	for len(tasks) > MaxBatchTasks {
		out[len(out)-1].Tasks = tasks[:MaxBatchTasks:MaxBatchTasks]
		tasks = tasks[MaxBatchTasks:]
		out = append(out, Batch{JobID: j.ID})
	}
	out[len(out)-1].Tasks = tasks
	room := maxSamples
	for _, js := range j.Series {
		s := SeriesOf(js)
		for from := 0; from < len(s.Ts); {
			if room == 0 || len(out[len(out)-1].Series) == MaxBatchSeries {
				out = append(out, Batch{JobID: j.ID})
				room = maxSamples
			}
			to := min(len(s.Ts), from+room)
			part := s
			// Full slice expressions: an append to a part can't reach the next.
			part.Ts, part.Vs = s.Ts[from:to:to], s.Vs[from:to:to]
			b := &out[len(out)-1]
			b.Series = append(b.Series, part)
			room -= to - from
			from = to
		}
	}
	return out
}
