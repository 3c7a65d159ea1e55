package history

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
)

// Report is one run's findings against the other runs of its window:
// what peakline regressions prints (Print) or writes as JSON.
type Report struct {
	TemplateID   string          `json:"template_id"`
	TemplateName string          `json:"template_name"`
	JobID        string          `json:"job_id"`
	Runs         int             `json:"runs"` // in the window the job was compared with, itself included
	Regressions  []ReportFinding `json:"regressions"`
	// Contended are the findings the task's stall explains (see
	// Rule): apart from the regressions, counted as regressions only when
	// asked (regressions --strict).
	Contended []ReportFinding `json:"contended"`
}

// ReportFinding is a finding of a Report: the task's key and the finding.
type ReportFinding struct {
	Task string `json:"task"` // the task's key
	Regression
}

// ReportOf collects the findings of run jobID in h, in task order.
func ReportOf(h *History, jobID string) Report {
	rep := Report{TemplateID: h.TemplateID, TemplateName: h.TemplateName, JobID: jobID, Runs: len(h.Runs),
		Regressions: []ReportFinding{}, Contended: []ReportFinding{}}
	for _, t := range h.Tasks {
		for _, r := range t.Regressions {
			switch {
			case r.JobID != jobID:
			case r.Contended:
				rep.Contended = append(rep.Contended, ReportFinding{Task: t.Key, Regression: r})
			default:
				rep.Regressions = append(rep.Regressions, ReportFinding{Task: t.Key, Regression: r})
			}
		}
	}
	return rep
}

// Print writes the report as tables for people.
func (rep Report) Print(w io.Writer) {
	name := rep.TemplateID
	if rep.TemplateName != "" {
		name += " (" + rep.TemplateName + ")"
	}
	if len(rep.Regressions) == 0 && rep.Runs-1 < DefaultRule().MinOthers {
		// Exit 0 still: a template's first runs must not fail a pipeline,
		// but the table must not read as a judgement.
		fmt.Fprintf(w, "template %s, job %s: no regressions: too few runs to compare (%d other runs; a run needs %d)\n", name, rep.JobID, rep.Runs-1, DefaultRule().MinOthers)
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
	case MetricDuration:
		return strconv.FormatFloat(v/1000, 'f', 1, 64) + " s"
	case MetricCPUSeconds:
		return strconv.FormatFloat(v, 'f', 1, 64) + " CPU s"
	case MetricCPUMax:
		return strconv.FormatFloat(v, 'f', 1, 64) + "%"
	case MetricMemoryMax:
		return strconv.FormatFloat(v/(1<<20), 'f', 1, 64) + " MiB"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}
