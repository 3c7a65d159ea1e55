package main

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/barchart"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/table"
)

// The job template view: a variable over the template ids of the jobs'
// info series, and per resource a table of every task's peak in each run
// of that template (a row per task name, a column per job), so the run
// where a task got heavier stands out in its row.

// JobInfoMetric is the series naming a job's template (package tsdb's
// MetricJobInfo): labels job_id, template_id, template_name, status,
// playbook and measured, one series per distinct label set of a job.
const JobInfoMetric = "peakline_job_info"

// templateVariable picks a job template by the template_id of the jobs'
// info series.
func templateVariable() *dashboard.QueryVariableBuilder {
	q := fmt.Sprintf("label_values(%s, template_id)", JobInfoMetric)
	return dashboard.NewQueryVariableBuilder("template").
		Label("Template").
		Description("An AWX job template id; the template panels compare the task peaks of its runs in the time range.").
		Datasource(ds).
		Query(dashboard.StringOrMap{Map: map[string]any{"qryType": 1, "query": q, "refId": "PrometheusVariableQueryEditor-VariableQuery"}}).
		Definition(q).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortNaturalAsc)
}

// templatePeaksExpr is the peak of metric per task and run (job_id) in
// the dashboard's range, for the runs of $template, labelled with the
// template id. The info series are reduced to one per job first (a job
// has one per status it went through), and their value (a write clock)
// is turned into 1, so the product keeps the peaks.
func templatePeaksExpr(metric string) string {
	return fmt.Sprintf(`max by (task, job_id) (max_over_time(%s[$__range]))`+
		` * on (job_id) group_left (template_id)`+
		` (0 * max by (job_id, template_id) (max_over_time(%s{template_id="$template"}[$__range])) + 1)`, metric, JobInfoMetric)
}

// templatePeaks lists the resources of the template view, in panel order.
var templatePeaks = []struct{ title, metric, unit string }{
	{"Memory", "peakline_memory_bytes", "bytes"},
	{"CPU", "peakline_cpu_percent", "percent"},
	{"PIDs", "peakline_pids", "none"},
}

// templatePeaksPanel is one resource's task × run table of peaks.
func templatePeaksPanel(title, metric, unit string) *table.PanelBuilder {
	return table.NewPanelBuilder().
		Title(fmt.Sprintf("%s peak per task across runs of template $template", title)).
		Description(fmt.Sprintf("The %s peak of every task (by name; a name repeated in a run shows its highest) in each run (job_id column) of the job template in the time range. A cell much redder than its row is a run where that task got heavier; Peakline's /templates/$template page flags such regressions.", title)).
		Datasource(ds).
		Span(24).
		Height(9).
		Unit(unit).
		Decimals(1).
		ColorScheme(dashboard.NewFieldColorBuilder().Mode(dashboard.FieldColorModeIdContinuousGrYlRd)).
		CellOptions(common.TableCellOptions{TableColoredBackgroundCellOptions: &common.TableColoredBackgroundCellOptions{
			Type: common.TableCellDisplayModeColorBackground, Mode: ptr(common.TableCellBackgroundDisplayModeGradient),
		}}).
		Filterable(true).
		WithTarget(prometheus.NewDataqueryBuilder().
			Datasource(ds).
			RefId("A").
			Expr(templatePeaksExpr(metric)).
			Format(prometheus.PromQueryFormatTable).
			Instant()).
		// A row per task, a column per run.
		WithTransformation(dashboard.DataTransformerConfig{Id: "groupingToMatrix", Options: map[string]any{
			"columnField": "job_id", "rowField": "task", "valueField": "Value", "emptyValue": "null",
		}}).
		OverrideByName("task\\job_id", []dashboard.DynamicConfigValue{
			{Id: "displayName", Value: "Task"},
			{Id: "custom.cellOptions", Value: map[string]any{"type": "auto"}},
		})
}

// withTemplateView adds the template variable and panels to d.
func withTemplateView(d *dashboard.DashboardBuilder) *dashboard.DashboardBuilder {
	d = d.WithVariable(templateVariable())
	d = d.WithPanel(memoryAgainstLimitPanel())
	for _, p := range templatePeaks {
		d = d.WithPanel(templatePeaksPanel(p.title, p.metric, p.unit))
	}
	return d
}

// RunPeakExpr is the memory peak of each run (job_id) of $template in
// the dashboard's range, as templatePeaksExpr joins runs to templates.
var RunPeakExpr = fmt.Sprintf(`max by (job_id) (max_over_time(peakline_memory_bytes[$__range]))`+
	` * on (job_id) group_left (template_id)`+
	` (0 * max by (job_id, template_id) (max_over_time(%s{template_id="$template"}[$__range])) + 1)`, JobInfoMetric)

// RunLimitExpr is the cgroup memory limit of each run of $template that
// had one: the memory_limit_bytes label of its info series, as a number
// (MetricsQL's label_value).
var RunLimitExpr = fmt.Sprintf(`max by (job_id) (label_value(max_over_time(%s{template_id="$template", memory_limit_bytes!=""}[$__range]), "memory_limit_bytes"))`, JobInfoMetric)

// memoryAgainstLimitPanel bars each run's memory peak beside its memory
// limit: a run whose peak meets its limit ran at its cap (or was
// OOM-killed); Peakline's /templates/$template page says what to set.
func memoryAgainstLimitPanel() *barchart.PanelBuilder {
	return barchart.NewPanelBuilder().
		Title("Memory peak per run against its limit, template $template").
		Description("Each run's (job_id) memory peak beside the memory limit of its cgroup, for the runs of the job template in the time range. A peak at its limit is a run at its cap or OOM-killed; the template page's Right-size section (and GET /api/v1/templates/$template/rightsize) says what request, limit and forks to set.").
		Datasource(ds).
		Span(24).
		Height(8).
		Unit("bytes").
		XField("job_id").
		WithTarget(prometheus.NewDataqueryBuilder().Datasource(ds).RefId("A").Expr(RunPeakExpr).
			LegendFormat("peak").Format(prometheus.PromQueryFormatTable).Instant()).
		WithTarget(prometheus.NewDataqueryBuilder().Datasource(ds).RefId("B").Expr(RunLimitExpr).
			LegendFormat("limit").Format(prometheus.PromQueryFormatTable).Instant()).
		// One row per run with its peak and limit.
		WithTransformation(dashboard.DataTransformerConfig{Id: "joinByField", Options: map[string]any{"byField": "job_id", "mode": "outer"}}).
		WithTransformation(dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
			"excludeByName": map[string]any{"Time": true, "Time 1": true, "Time 2": true, "template_id": true},
			"renameByName":  map[string]any{"Value #A": "peak", "Value #B": "limit"},
		}})
}
