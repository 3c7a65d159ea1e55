package history

import (
	"bufio"
	"fmt"
	"io"
)

// WriteText writes rs for people: the recommendation, its basis, the
// fork fit, the OOM-killed and at-cap runs and the notes, one figure a
// line.
func (rs *RightSize) WriteText(w io.Writer) error {
	b := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(b, format+"\n", args...) }
	p("template %s: %d of %d runs used, confidence %s", rs.TemplateID, rs.RunsUsed, rs.Runs, rs.Confidence)
	if rs.RunsUsed == 0 {
		for _, n := range rs.Notes {
			p("  %s", n)
		}
		return b.Flush()
	}
	m, c, f := rs.Memory, rs.CPU, rs.Forks
	p("memory   request %s, limit %s: %s", mib(float64(m.RequestBytes)), mib(float64(m.LimitBytes)), m.Basis)
	limit := "no memory limit seen"
	if m.CurrentLimitBytes > 0 {
		limit = "current limit " + mib(float64(m.CurrentLimitBytes))
	}
	p("         run peaks p50 %s, p95 %s, max %s; %s", mib(float64(m.P50Bytes)), mib(float64(m.P95Bytes)), mib(float64(m.MaxBytes)), limit)
	if d := m.DrivenBy; d != nil {
		p("         driven by %q (%s): %s in job %s at task %d", d.Task, d.Key, mib(float64(d.PeakBytes)), d.JobID, d.Counter)
	}
	p("cpu      request %dm: %s; peak %.0fm", c.RequestMillicores, c.Basis, c.PeakMillicores)
	if f.PerForkBytes != nil {
		r2 := "-"
		if f.Fit.R2 != nil {
			r2 = fmt.Sprintf("%.4f", *f.Fit.R2)
		}
		p("forks    %s per fork over %s (%d runs, r² %s); AWX assumes %s", mib(float64(*f.PerForkBytes)), mib(float64(*f.BaseBytes)), f.Fit.Runs, r2, mib(float64(f.AWXPerForkBytes)))
	}
	if f.MaxForksForLimit != nil {
		p("         at most %d forks in %s", *f.MaxForksForLimit, mib(float64(f.LimitBytes)))
	}
	for _, o := range rs.OOM {
		at := ""
		if o.LimitBytes > 0 {
			at = " at a limit of " + mib(float64(o.LimitBytes))
		}
		p("oom      job %s: killed in %q (task %d)%s, %d kills", o.JobID, o.Task, o.Counter, at, o.Kills)
	}
	for _, a := range rs.AtCap {
		p("at cap   job %s: %s of %s in %q (task %d)", a.JobID, mib(float64(a.PeakBytes)), mib(float64(a.LimitBytes)), a.Task, a.Counter)
	}
	for _, n := range rs.Notes {
		p("note     %s", n)
	}
	return b.Flush()
}
