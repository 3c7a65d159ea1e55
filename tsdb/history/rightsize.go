package history

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Numbers of the right-sizing rule (see Rightsize and docs/rightsizing.md).
const (
	// MemoryQuantile of the recency-weighted per-run memory peaks is the
	// memory target, and MemoryMargin the share added on top: the 15 %
	// of the Kubernetes VPA recommender's safety margin. VPA aims at
	// p90 of a pod's memory peaks over time; a template's runs are few
	// and each is one peak, so p95 takes the top run or the one below.
	MemoryQuantile = 0.95
	MemoryMargin   = 0.15
	// OOMBumpBytes and OOMBumpFactor raise the memory of a run killed
	// for memory to max(limit + OOMBumpBytes, limit × OOMBumpFactor), as
	// the VPA recommender does with the memory of a container it saw
	// OOM-killed: the peak of a killed run says only that it needed
	// more than its limit.
	OOMBumpBytes  = 100 << 20
	OOMBumpFactor = 1.2
	// CPUQuantile of the run time at each task's mean CPU is the CPU
	// request (VPA's CPU target is p90 of usage samples; the task mean
	// is the finest figure a run keeps for every task).
	CPUQuantile = 0.90
	// HalfLifeRuns is the recency weighting: a run's weight halves with
	// every HalfLifeRuns newer runs, so in a window of 20 the oldest
	// weighs a quarter of the newest.
	HalfLifeRuns = 10
	// AtCapShare: a run whose memory peak reached this share of its
	// cgroup's limit ran at its cap (the kernel reclaimed its caches or
	// stalled it to stay under the limit).
	AtCapShare = 0.95
	// AWXPerForkBytes is AWX's memory cost of one fork
	// (SYSTEM_TASK_FORKS_MEM = 100, in MiB), the figure AWX's capacity
	// and Red Hat's sizing guidance use.
	AWXPerForkBytes = 100 << 20
	// MinRunsConfident is the run count under which confidence is low.
	MinRunsConfident = 5
	// HighConfidenceRuns and HighConfidenceSpread: with at least this
	// many runs and (p95 − p50)/p50 of the peaks at most this,
	// confidence is high.
	HighConfidenceRuns   = 10
	HighConfidenceSpread = 0.25
	// DefaultForks is ansible's forks when nothing says otherwise.
	DefaultForks = 5
)

// SizeOptions tunes Rightsize.
type SizeOptions struct {
	// LimitBytes is the memory that max_forks_for_limit must fit in
	// (?limit=); 0 is the recommended limit.
	LimitBytes float64
}

// RightSize is the answer of GET /api/v1/templates/{id}/rightsize.
type RightSize struct {
	TemplateID string       `json:"template_id"`
	Runs       int          `json:"runs"`      // runs in the window asked for
	RunsUsed   int          `json:"runs_used"` // runs the recommendation reads
	LeftOut    LeftOut      `json:"left_out"`
	Confidence string       `json:"confidence"` // low, medium or high (see notes for why)
	Memory     MemoryAdvice `json:"memory"`
	CPU        CPUAdvice    `json:"cpu"`
	Forks      ForksAdvice  `json:"forks"`
	OOM        []OOMRun     `json:"oom"`    // runs OOM-killed, oldest first
	AtCap      []AtCapRun   `json:"at_cap"` // runs at their memory limit, oldest first
	// PodSpecOverride is a container-group pod spec (YAML) with the
	// worker container's requests and limits; "" without a memory or CPU
	// figure.
	PodSpecOverride string   `json:"pod_spec_override"`
	Notes           []string `json:"notes"`
}

// LeftOut counts the runs of the window the recommendation does not read.
type LeftOut struct {
	Unfinished   int `json:"unfinished"`    // still going (see Unfinished)
	Canceled     int `json:"canceled"`      // cut short by a person, not by their needs
	BeforeChange int `json:"before_change"` // older than the newest project revision or EE image change
	NoMemory     int `json:"no_memory"`     // no memory samples
}

// MemoryAdvice is the memory recommendation, in bytes. P50, P95 and Max
// are of the per-run peaks of the runs used, unweighted; TargetBytes is
// the recency-weighted MemoryQuantile the request grows from.
type MemoryAdvice struct {
	RequestBytes int64 `json:"request_bytes"`
	LimitBytes   int64 `json:"limit_bytes"`
	TargetBytes  int64 `json:"target_bytes"`
	P50Bytes     int64 `json:"p50_bytes"`
	P95Bytes     int64 `json:"p95_bytes"`
	MaxBytes     int64 `json:"max_bytes"`
	// CurrentLimitBytes is the cgroup memory limit of the newest run used
	// that had one; 0 none known.
	CurrentLimitBytes int64     `json:"current_limit_bytes"`
	Basis             string    `json:"basis"`
	DrivenBy          *DrivenBy `json:"driven_by"` // null without memory samples
}

// DrivenBy is the task whose memory peaks drive the recommendation: the
// task with the highest recency-weighted MemoryQuantile of its peaks,
// and the run where it peaked highest (JobID, Counter) to look at.
type DrivenBy struct {
	Task      string `json:"task"`
	Key       string `json:"key"` // as the history API keys it
	JobID     string `json:"job_id"`
	Counter   int64  `json:"counter"`
	PeakBytes int64  `json:"peak_bytes"`
}

// CPUAdvice is the CPU recommendation in millicores (1000 = one CPU).
// The limit is null: a CPU limit throttles a job that the node could
// run faster, and Ansible's bursts (fact gathering, templating) are
// short.
type CPUAdvice struct {
	RequestMillicores int64   `json:"request_millicores"`
	LimitMillicores   *int64  `json:"limit_millicores"`
	P90Millicores     float64 `json:"p90_millicores"`
	PeakMillicores    float64 `json:"peak_millicores"` // highest CPU peak of a run used
	Basis             string  `json:"basis"`
}

// ForksAdvice is the fit of a run's memory peak against its effective
// forks (min(hosts, forks)): peak ≈ BaseBytes + PerForkBytes × forks.
// PerForkBytes, BaseBytes and MaxForksForLimit are null without a fit
// (fewer than two distinct effective forks among the runs used).
type ForksAdvice struct {
	PerForkBytes    *int64 `json:"per_fork_bytes"`
	BaseBytes       *int64 `json:"base_bytes"`
	Fit             Fit    `json:"fit"`
	AWXPerForkBytes int64  `json:"awx_per_fork_bytes"`
	// MaxForksForLimit is the most effective forks whose fitted memory
	// plus MemoryMargin fits in LimitBytes (?limit=, else the recommended
	// limit); null where the fit shows no memory per fork.
	MaxForksForLimit *int  `json:"max_forks_for_limit"`
	LimitBytes       int64 `json:"limit_bytes"`
	Forks            int   `json:"forks"` // effective forks of the newest run used; 0 unknown
}

// Fit says how many runs the fork fit read and how well it fits.
type Fit struct {
	Runs int      `json:"runs"`
	R2   *float64 `json:"r2"` // null where the peaks do not vary
}

// OOMRun is a run OOM-killed: the task running at the kill and the limit
// it was killed at (0 unknown).
type OOMRun struct {
	JobID      string `json:"job_id"`
	Task       string `json:"task"`
	Counter    int64  `json:"counter"`
	Kills      int    `json:"kills"`
	LimitBytes int64  `json:"limit_bytes"`
	PeakBytes  int64  `json:"peak_bytes"`
}

// AtCapRun is a run whose memory peak reached AtCapShare of its limit,
// with the task where it peaked.
type AtCapRun struct {
	JobID      string `json:"job_id"`
	Task       string `json:"task"`
	Counter    int64  `json:"counter"`
	PeakBytes  int64  `json:"peak_bytes"`
	LimitBytes int64  `json:"limit_bytes"`
}

// Rightsize recommends the memory, CPU and forks of a template from runs
// (oldest first; see docs/rightsizing.md for the rule and why). It does
// not modify runs.
func Rightsize(templateID string, runs []Run, opts SizeOptions) RightSize {
	rs := RightSize{TemplateID: templateID, Runs: len(runs), OOM: []OOMRun{}, AtCap: []AtCapRun{}, Notes: []string{}, Confidence: "low"}
	rs.Forks.AWXPerForkBytes = AWXPerForkBytes
	start := windowStart(runs, &rs.Notes)
	rs.LeftOut.BeforeChange = start
	var used []Run
	for _, r := range runs[start:] {
		switch {
		case Unfinished(r.Status):
			rs.LeftOut.Unfinished++
		case r.Status == "canceled" || r.Status == "cancelled":
			rs.LeftOut.Canceled++
		default:
			if _, ok := r.RunValue(MetricMemoryMax); !ok {
				rs.LeftOut.NoMemory++
				continue
			}
			used = append(used, r)
		}
	}
	rs.RunsUsed = len(used)
	if n := rs.LeftOut.Unfinished + rs.LeftOut.Canceled; n > 0 {
		rs.Notes = append(rs.Notes, fmt.Sprintf("%d runs left out: %d still going, %d canceled", n, rs.LeftOut.Unfinished, rs.LeftOut.Canceled))
	}
	if rs.LeftOut.NoMemory > 0 {
		rs.Notes = append(rs.Notes, fmt.Sprintf("%d runs left out: no memory samples", rs.LeftOut.NoMemory))
	}
	if len(used) == 0 {
		rs.Notes = append(rs.Notes, "no finished run with memory samples: nothing to recommend")
		return rs
	}
	weights := recencyWeights(len(used))
	peaks := make([]float64, len(used))
	for i := range used {
		peaks[i], _ = used[i].RunValue(MetricMemoryMax)
	}
	memoryAdvice(&rs, used, peaks, weights)
	cpuAdvice(&rs, used, weights)
	forksAdvice(&rs, used, peaks, opts)
	rs.Confidence = confidence(len(used), rs.Memory, &rs.Notes)
	rs.PodSpecOverride = PodSpec(rs.Memory.RequestBytes, rs.Memory.LimitBytes, rs.CPU.RequestMillicores, newestImage(runs))
	return rs
}

// windowStart returns the index of the oldest run of the window's last
// stretch of one project revision and one EE image: the newest run
// known to have each sets it, and an older run known to differ, and all
// runs before it, are left out (a note says where and why). A run that
// does not say its revision or image changes nothing.
func windowStart(runs []Run, notes *[]string) int {
	rev, img := "", ""
	revJob, imgJob := "", ""
	for i := len(runs) - 1; i >= 0; i-- {
		s := runs[i].Sizing
		if r := s.ProjectRevision; r != "" {
			if rev == "" {
				rev, revJob = r, runs[i].JobID
			} else if r != rev {
				*notes = append(*notes, fmt.Sprintf("window starts after job %s: project revision %s from job %s on (was %s)", runs[i].JobID, shortRev(rev), revJob, shortRev(r)))
				return i + 1
			}
		}
		if m := s.EEImage; m != "" {
			if img == "" {
				img, imgJob = m, runs[i].JobID
			} else if m != img {
				*notes = append(*notes, fmt.Sprintf("window starts after job %s: execution environment %s from job %s on (was %s)", runs[i].JobID, img, imgJob, m))
				return i + 1
			}
		}
	}
	return 0
}

// shortRev shortens an SCM revision to 12 characters, as git shows them.
func shortRev(r string) string {
	if len(r) > 12 {
		return r[:12]
	}
	return r
}

// newestImage returns the EE image of the newest run that names one.
func newestImage(runs []Run) string {
	for i := len(runs) - 1; i >= 0; i-- {
		if runs[i].Sizing.EEImage != "" {
			return runs[i].Sizing.EEImage
		}
	}
	return ""
}

// recencyWeights returns the weights of n runs, oldest first: the newest
// weighs 1, each older one 2^(−1/HalfLifeRuns) times the next.
func recencyWeights(n int) []float64 {
	w := make([]float64, n)
	for i := range w {
		w[i] = math.Exp2(-float64(n-1-i) / HalfLifeRuns)
	}
	return w
}

// weightedQuantile returns the smallest value whose cumulative weight
// (values ascending) reaches q of the total weight, the step rule of the
// VPA recommender's histograms; ws[i] weighs vs[i]. It sorts neither
// input; it returns 0 for no values.
func weightedQuantile(vs, ws []float64, q float64) float64 {
	idx := make([]int, len(vs))
	total := 0.0
	for i := range idx {
		idx[i] = i
		total += ws[i]
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(vs[a], vs[b]) })
	cum := 0.0
	for _, i := range idx {
		cum += ws[i]
		// A relative tolerance keeps rounding in the sum from skipping
		// the value that reaches q exactly.
		if cum >= q*total*(1-1e-12) {
			return vs[i]
		}
	}
	if len(idx) == 0 {
		return 0
	}
	return vs[idx[len(idx)-1]]
}

// ceilMiB rounds bytes up to a whole MiB.
func ceilMiB(b float64) int64 { return int64(math.Ceil(b/(1<<20))) << 20 }

// oomBump is the memory a run killed at limitBytes needed at least.
func oomBump(limitBytes float64) float64 {
	return max(limitBytes+OOMBumpBytes, limitBytes*OOMBumpFactor)
}

// memoryAdvice fills rs.Memory, rs.OOM and rs.AtCap from the runs used
// (oldest first), their peaks and weights.
func memoryAdvice(rs *RightSize, used []Run, peaks, weights []float64) {
	m := &rs.Memory
	d, _ := distOf(slices.Clone(peaks))
	m.P50Bytes, m.P95Bytes, m.MaxBytes = int64(d.P50), int64(d.P95), int64(d.Max)
	target := weightedQuantile(peaks, weights, MemoryQuantile)
	m.TargetBytes = int64(target)
	need := target * (1 + MemoryMargin)
	m.Basis = fmt.Sprintf("p%d of per-run peaks (recency-weighted) + %d%%", int(MemoryQuantile*100), int(MemoryMargin*100))
	for i := range used {
		r := &used[i]
		s := r.Sizing
		if s.MemoryLimitBytes > 0 {
			m.CurrentLimitBytes = int64(s.MemoryLimitBytes)
		}
		if s.OOMKills > 0 {
			o := OOMRun{JobID: r.JobID, Counter: s.OOMCounter, Kills: s.OOMKills, LimitBytes: int64(s.MemoryLimitBytes), PeakBytes: int64(peaks[i])}
			o.Task = taskName(r, s.OOMCounter)
			rs.OOM = append(rs.OOM, o)
			at := s.MemoryLimitBytes
			what := "limit"
			if at <= 0 {
				at, what = peaks[i], "peak"
			}
			if b := oomBump(at); b > need {
				need = b
				m.Basis = fmt.Sprintf("OOM kill of job %s at a %s of %s: max(%s + 100 MiB, %s × %.1f)", r.JobID, what, mib(at), what, what, OOMBumpFactor)
			}
			continue
		}
		if s.MemoryLimitBytes > 0 && peaks[i] >= AtCapShare*s.MemoryLimitBytes {
			t := peakTask(r)
			a := AtCapRun{JobID: r.JobID, PeakBytes: int64(peaks[i]), LimitBytes: int64(s.MemoryLimitBytes)}
			if t != nil {
				a.Task, a.Counter = t.Name, t.Counter
			}
			rs.AtCap = append(rs.AtCap, a)
		}
	}
	m.RequestBytes = ceilMiB(need)
	m.LimitBytes = m.RequestBytes
	if len(rs.AtCap) > 0 {
		rs.Notes = append(rs.Notes, fmt.Sprintf("%d runs reached %d%% of their memory limit: their peaks are what the limit let them have, so their need may be higher", len(rs.AtCap), int(AtCapShare*100)))
	}
	m.DrivenBy = drivenBy(used, weights)
}

// taskName returns the name of the run's task of counter ("" unknown).
func taskName(r *Run, counter int64) string {
	if counter == 0 {
		return ""
	}
	for i := range r.Tasks {
		if r.Tasks[i].Counter == counter {
			return r.Tasks[i].Name
		}
	}
	return ""
}

// peakTask returns the run's task with the highest memory peak (the
// first of equal ones), nil without memory samples.
func peakTask(r *Run) *TaskRun {
	var best *TaskRun
	for i := range r.Tasks {
		t := &r.Tasks[i]
		if t.Max.Memory != nil && (best == nil || *t.Max.Memory > *best.Max.Memory) {
			best = t
		}
	}
	return best
}

// drivenBy finds the task with the highest weighted MemoryQuantile of
// its memory peaks over the runs used (ties: the first in Match order).
func drivenBy(used []Run, weights []float64) *DrivenBy {
	var best *DrivenBy
	bestQ := math.Inf(-1)
	for _, t := range Match(used) {
		var vs, ws []float64
		top, topRun := math.Inf(-1), -1
		for ri, at := range t.At {
			if at < 0 || used[ri].Tasks[at].Max.Memory == nil {
				continue
			}
			v := *used[ri].Tasks[at].Max.Memory
			vs, ws = append(vs, v), append(ws, weights[ri])
			if v >= top {
				top, topRun = v, ri
			}
		}
		if len(vs) == 0 {
			continue
		}
		if q := weightedQuantile(vs, ws, MemoryQuantile); q > bestQ {
			bestQ = q
			tr := &used[topRun].Tasks[t.At[topRun]]
			best = &DrivenBy{Task: t.Name, Key: t.Key, JobID: used[topRun].JobID, Counter: tr.Counter, PeakBytes: int64(top)}
		}
	}
	return best
}

// cpuAdvice fills rs.CPU: the weighted CPUQuantile of the run time spent
// at each task's mean CPU, each task weighing its duration times its
// run's weight.
func cpuAdvice(rs *RightSize, used []Run, weights []float64) {
	var vs, ws []float64
	peak := 0.0
	for ri := range used {
		for i := range used[ri].Tasks {
			t := &used[ri].Tasks[i]
			if t.Mean.CPU == nil || t.EndMs <= t.StartMs {
				continue
			}
			vs = append(vs, *t.Mean.CPU)
			ws = append(ws, weights[ri]*float64(t.EndMs-t.StartMs))
			peak = max(peak, *t.Max.CPU)
		}
	}
	c := &rs.CPU
	c.Basis = fmt.Sprintf("p%d of run time at each task's mean CPU (recency-weighted); no limit", int(CPUQuantile*100))
	if len(vs) == 0 {
		rs.Notes = append(rs.Notes, "no CPU samples: no CPU request")
		return
	}
	// 100 % of one CPU is 1000 millicores.
	c.P90Millicores = math.Round(weightedQuantile(vs, ws, CPUQuantile)*10*10) / 10
	c.PeakMillicores = math.Round(peak*10*10) / 10
	c.RequestMillicores = max(1, int64(math.Ceil(c.P90Millicores)))
}

// forksAdvice fits the runs' peaks against their effective forks and
// fills rs.Forks.
func forksAdvice(rs *RightSize, used []Run, peaks []float64, opts SizeOptions) {
	f := &rs.Forks
	var xs, ys []float64
	distinct := map[int]bool{}
	censored := 0
	for i := range used {
		s := used[i].Sizing
		eff := effectiveForks(s)
		if eff == 0 {
			continue
		}
		f.Forks = eff
		// A killed run's peak, or one at its limit, is what the limit let
		// it have, not what its forks needed.
		if s.OOMKills > 0 || (s.MemoryLimitBytes > 0 && peaks[i] >= AtCapShare*s.MemoryLimitBytes) {
			censored++
			continue
		}
		xs, ys = append(xs, float64(eff)), append(ys, peaks[i])
		distinct[eff] = true
	}
	if censored > 0 {
		rs.Notes = append(rs.Notes, fmt.Sprintf("%d runs OOM-killed or at their limit left out of the fork fit", censored))
	}
	f.Fit.Runs = len(xs)
	f.LimitBytes = rs.Memory.LimitBytes
	if opts.LimitBytes > 0 {
		f.LimitBytes = int64(opts.LimitBytes)
	}
	if len(distinct) < 2 {
		switch {
		case len(xs) == 0 && censored > 0:
			rs.Notes = append(rs.Notes, "every run with known forks was OOM-killed or at its limit: no per-fork fit")
		case len(xs) == 0:
			rs.Notes = append(rs.Notes, "no run says its forks: no per-fork fit")
		default:
			rs.Notes = append(rs.Notes, fmt.Sprintf("every run with known forks had %d effective fork(s): runs with other --forks (or host counts) are needed to fit the memory per fork", f.Forks))
		}
		return
	}
	base, slope, r2, ok := fitLine(xs, ys)
	if !ok {
		return
	}
	pf, b := int64(math.Round(slope)), int64(math.Round(base))
	f.PerForkBytes, f.BaseBytes = &pf, &b
	if !math.IsNaN(r2) {
		r := math.Round(r2*1e4) / 1e4
		f.Fit.R2 = &r
	}
	rs.Notes = append(rs.Notes, fmt.Sprintf("memory per fork %s measured over %d runs, against AWX's %s (SYSTEM_TASK_FORKS_MEM)", mib(slope), len(xs), mib(AWXPerForkBytes)))
	if slope <= 0 {
		rs.Notes = append(rs.Notes, "memory does not grow with forks here: no fork bound")
		return
	}
	n := int(math.Floor((float64(f.LimitBytes)/(1+MemoryMargin) - base) / slope))
	n = max(0, n)
	f.MaxForksForLimit = &n
}

// effectiveForks is min(hosts, forks) of a run (forks alone when the
// host count is unknown), 0 when its forks are unknown: ansible runs at
// most one worker per host.
func effectiveForks(s Sizing) int {
	if s.Forks <= 0 {
		return 0
	}
	if s.Hosts > 0 {
		return min(s.Hosts, s.Forks)
	}
	return s.Forks
}

// fitLine fits ys ≈ base + slope × xs by least squares and returns the
// coefficient of determination r² (NaN when ys do not vary); ok is false
// when xs do not vary.
func fitLine(xs, ys []float64) (base, slope, r2 float64, ok bool) {
	n := float64(len(xs))
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx, my = mx/n, my/n
	var sxx, sxy, syy float64
	for i := range xs {
		dx, dy := xs[i]-mx, ys[i]-my
		sxx += dx * dx
		sxy += dx * dy
		syy += dy * dy
	}
	if sxx == 0 {
		return 0, 0, 0, false
	}
	slope = sxy / sxx
	base = my - slope*mx
	if syy == 0 {
		return base, slope, math.NaN(), true
	}
	var res float64
	for i := range xs {
		e := ys[i] - (base + slope*xs[i])
		res += e * e
	}
	return base, slope, 1 - res/syy, true
}

// confidence grades the recommendation by the run count and the spread
// of the peaks, and says why in notes.
func confidence(runs int, m MemoryAdvice, notes *[]string) string {
	spread := 0.0
	if m.P50Bytes > 0 {
		spread = float64(m.P95Bytes-m.P50Bytes) / float64(m.P50Bytes)
	}
	sp := fmt.Sprintf("p95 of the peaks %.0f%% above their median", spread*100)
	switch {
	case runs < MinRunsConfident:
		*notes = append(*notes, fmt.Sprintf("confidence low: %d runs (fewer than %d)", runs, MinRunsConfident))
		return "low"
	case spread > 1:
		*notes = append(*notes, "confidence low: "+sp)
		return "low"
	case runs >= HighConfidenceRuns && spread <= HighConfidenceSpread:
		*notes = append(*notes, fmt.Sprintf("confidence high: %d runs, %s", runs, sp))
		return "high"
	}
	*notes = append(*notes, fmt.Sprintf("confidence medium: %d runs, %s", runs, sp))
	return "medium"
}

// mib formats bytes as MiB with one decimal.
func mib(b float64) string {
	s := fmt.Sprintf("%.1f", b/(1<<20))
	return strings.TrimSuffix(s, ".0") + " MiB"
}
