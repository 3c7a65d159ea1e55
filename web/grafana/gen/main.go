// Command gen writes Peakline's Grafana dashboard as JSON, built with the
// Grafana Foundation SDK. `go generate ./web/grafana` runs it; its output
// is committed, and a test checks that it is up to date.
//
// The dashboard reads Peakline's Prometheus-compatible API through a
// Grafana Prometheus data source (see ../provisioning): a job picker over
// job_id, CPU, memory and PID panels per task, a table of every task's
// max and mean and the time of its CPU and memory peaks, task starts as annotations, and from any point a link to
// the AWX job-events search of its task.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

func main() {
	out := flag.String("o", "dashboards/peakline.json", "file to write the dashboard to")
	flag.Parse()
	b, err := Render()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

// Names the dashboard and the provisioning files agree on.
const (
	DashboardUID  = "peakline-job"
	DatasourceUID = "peakline" // provisioning/datasources/peakline.yaml
	// EventsPath is the AWX job-events search of the task a point belongs
	// to: its events start at the task's start counter.
	EventsPath = "/api/v2/jobs/${__field.labels.job_id}/job_events/?counter__gte=${__field.labels.counter}&order_by=counter"
)

// Render returns the dashboard JSON, indented, with a final newline.
func Render() ([]byte, error) {
	d, err := Dashboard().Build()
	if err != nil {
		return nil, fmt.Errorf("build dashboard: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep the & of URLs readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return nil, fmt.Errorf("encode dashboard: %w", err)
	}
	// Values the SDK encodes itself (field overrides) come HTML-escaped.
	return unescapeHTML(buf.Bytes()), nil
}

var htmlEscapes = map[string]byte{`\u0026`: '&', `\u003c`: '<', `\u003e`: '>'}

// unescapeHTML turns the JSON escapes \u0026, \u003c and \u003e back into
// &, < and >, leaving every other escape as it is.
func unescapeHTML(src []byte) []byte {
	dst := make([]byte, 0, len(src))
	for i := 0; i < len(src); i++ {
		if src[i] != '\\' || i+1 == len(src) {
			dst = append(dst, src[i])
			continue
		}
		if i+6 <= len(src) {
			if c, ok := htmlEscapes[string(src[i:i+6])]; ok {
				dst = append(dst, c)
				i += 5
				continue
			}
		}
		dst = append(dst, src[i], src[i+1]) // another escape, \\ included
		i++
	}
	return dst
}

func ptr[T any](v T) *T { return &v }

// ds is the data source of every query: the dashboard's datasource
// variable, which defaults to the provisioned Peakline data source.
var ds = common.DataSourceRef{Type: ptr("prometheus"), Uid: ptr("${datasource}")}

// Dashboard builds the job dashboard, with the job template view
// (template.go) after the job's panels.
func Dashboard() *dashboard.DashboardBuilder {
	return withTemplateView(jobDashboard())
}

// jobDashboard builds the panels and variables of one job.
func jobDashboard() *dashboard.DashboardBuilder {
	return dashboard.NewDashboardBuilder("Peakline: Ansible job").
		Uid(DashboardUID).
		Description("Per-task CPU, memory and PIDs of one Ansible job, from Peakline's Prometheus-compatible API. Click a point to open the job events of its task in AWX.").
		Tags([]string{"peakline", "ansible"}).
		Editable().
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Time("now-6h", "now").
		Timezone("browser").
		Refresh("30s").
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").
			Label("Data source").
			Type("prometheus").
			Current(dashboard.VariableOption{Text: dashboard.StringOrArrayOfString{String: ptr("Peakline")}, Value: dashboard.StringOrArrayOfString{String: ptr(DatasourceUID)}})).
		WithVariable(dashboard.NewQueryVariableBuilder("job").
			Label("Job").
			Description("The job_id of an Ansible job (the AWX job id, or the ansible-runner ident).").
			Datasource(ds).
			Query(dashboard.StringOrMap{Map: map[string]any{"qryType": 1, "query": "label_values(job_id)", "refId": "PrometheusVariableQueryEditor-VariableQuery"}}).
			Definition("label_values(job_id)").
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
			Sort(dashboard.VariableSortNaturalDesc)).
		WithVariable(dashboard.NewTextBoxVariableBuilder("awx").
			Label("AWX URL").
			Description("Base URL of AWX or Tower; point links open its job-events search.").
			DefaultValue(dashboard.StringOrMap{String: ptr("https://awx.example")})).
		Annotation(dashboard.NewAnnotationQueryBuilder().
			Name("Task starts").
			Datasource(ds).
			Enable(true).
			IconColor("rgba(255, 152, 48, 1)").
			// One sample per task at its start: its timestamp (in ms) is
			// the annotation's time, the same at every step of the lookback.
			Expr(`round(timestamp(peakline_task_start{job_id="$job"}) * 1000)`).
			UseValueForTime(true).
			Step("10s").
			TitleFormat("{{task}}").
			TextFormat("task {{counter}} ({{task_uuid}})").
			TagKeys("counter")).
		WithPanel(resourcePanel("CPU", "peakline_cpu_percent", "percent", "Percent of one CPU; above 100 is more than one CPU busy.").Height(9)).
		WithPanel(resourcePanel("Memory", "peakline_memory_bytes", "bytes", "Memory of the task's processes.").Height(9)).
		WithPanel(resourcePanel("PIDs", "peakline_pids", "none", "Processes of the task.").Decimals(0).Height(7)).
		WithPanel(tasksTable())
}

// eventsLink opens the AWX job-events search of a point's task.
func eventsLink() []cog.Builder[dashboard.DashboardLink] {
	return []cog.Builder[dashboard.DashboardLink]{
		dashboard.NewDashboardLinkBuilder("Job events of task ${__field.labels.counter} (${__field.labels.task})").
			Url("${awx}" + EventsPath).
			TargetBlank(true),
	}
}

// TaskSeriesExpr is the query of a resource panel: each task's samples
// of metric, a point per step where the task has one. A raw selector
// would have Prometheus' lookback repeat a finished task's last value
// for five minutes; last_over_time over one interval (Grafana makes the
// step the interval) yields, at each step, the last real sample of the
// step before it, so a task's series ends one step after its last
// sample at most, no sample is drawn twice, and the legend's max and
// mean are over real samples.
func TaskSeriesExpr(metric string) string {
	return fmt.Sprintf(`last_over_time(%s{job_id="$job"}[$__interval])`, metric)
}

// spanGapMs is the longest gap within a task's series that the resource
// panels draw across: at a step near the sampling period, a step can
// fall between two samples (250 ms to 1 s apart) and leave a null that
// is no gap in the data. A gap from one task to the next is no gap
// within a series: each task has a series of its own.
const spanGapMs = 5000

// resourcePanel graphs one resource of the job, a series per task.
func resourcePanel(title, metric, unit, description string) *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(ds).
		Span(24).
		Unit(unit).
		Min(0).
		LineWidth(1).
		FillOpacity(10).
		ShowPoints(common.VisibilityModeNever).
		SpanNulls(common.BoolOrFloat64{Float64: ptr(float64(spanGapMs))}).
		Legend(common.NewVizLegendOptionsBuilder().
			DisplayMode(common.LegendDisplayModeTable).
			Placement(common.LegendPlacementRight).
			ShowLegend(true).
			Calcs([]string{"max", "mean"})).
		Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending)).
		DataLinks(eventsLink()).
		WithTarget(prometheus.NewDataqueryBuilder().
			Datasource(ds).
			RefId("A").
			Expr(TaskSeriesExpr(metric)).
			LegendFormat("{{counter}} {{task}}").
			Range())
}

// taskStat is one column of the task table.
type taskStat struct {
	refID, column, expr, unit string
}

// taskStats are the max and mean of each resource per task over the
// dashboard's time range, and the time of the peak (MetricsQL's
// tmax_over_time, in seconds; Grafana's date units read milliseconds).
var taskStats = []taskStat{
	{"A", "CPU max", `max_over_time(peakline_cpu_percent{job_id="$job"}[$__range])`, "percent"},
	{"B", "CPU mean", `avg_over_time(peakline_cpu_percent{job_id="$job"}[$__range])`, "percent"},
	{"C", "Memory max", `max_over_time(peakline_memory_bytes{job_id="$job"}[$__range])`, "bytes"},
	{"D", "Memory mean", `avg_over_time(peakline_memory_bytes{job_id="$job"}[$__range])`, "bytes"},
	{"E", "PIDs max", `max_over_time(peakline_pids{job_id="$job"}[$__range])`, "none"},
	{"F", "PIDs mean", `avg_over_time(peakline_pids{job_id="$job"}[$__range])`, "none"},
	{"G", "CPU peak at", `tmax_over_time(peakline_cpu_percent{job_id="$job"}[$__range]) * 1000`, timeUnit},
	{"H", "Memory peak at", `tmax_over_time(peakline_memory_bytes{job_id="$job"}[$__range]) * 1000`, timeUnit},
}

// timeUnit shows a unix time in milliseconds as a date and time.
const timeUnit = "dateTimeAsIso"

// tasksTable lists every task with the max and mean of each resource; its
// counter links to the task's job events.
func tasksTable() *table.PanelBuilder {
	p := table.NewPanelBuilder().
		Title("Tasks").
		Description("Every task of the job in the time range, with the max and mean of each resource and when CPU and memory peaked. Click a counter to open the task's job events in AWX.").
		Datasource(ds).
		Span(24).
		Height(10).
		SortBy([]cog.Builder[common.TableSortByFieldState]{common.NewTableSortByFieldStateBuilder().DisplayName("Counter")}).
		Filterable(true)
	renames := map[string]any{"counter": "Counter", "task": "Task", "task_uuid": "Task UUID"}
	order := map[string]any{"counter": 0, "task": 1, "task_uuid": 2 + len(taskStats)}
	for i, s := range taskStats {
		p.WithTarget(prometheus.NewDataqueryBuilder().
			Datasource(ds).
			RefId(s.refID).
			Expr(fmt.Sprintf("max by (counter, task, task_uuid) (%s)", s.expr)).
			Format(prometheus.PromQueryFormatTable).
			Instant())
		renames["Value #"+s.refID] = s.column
		order["Value #"+s.refID] = 2 + i
		cfg := []dashboard.DynamicConfigValue{{Id: "unit", Value: s.unit}}
		if s.unit != timeUnit {
			cfg = append(cfg, dashboard.DynamicConfigValue{Id: "decimals", Value: 1})
		}
		p.OverrideByName(s.column, cfg)
	}
	return p.
		WithTransformation(dashboard.DataTransformerConfig{Id: "merge", Options: map[string]any{}}).
		WithTransformation(dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
			"excludeByName": map[string]any{"Time": true},
			"renameByName":  renames,
			"indexByName":   order,
		}}).
		OverrideByName("Counter", []dashboard.DynamicConfigValue{{Id: "links", Value: []map[string]any{{
			"title":       "Job events of task ${__value.raw}",
			"url":         "${awx}/api/v2/jobs/${job}/job_events/?counter__gte=${__value.raw}&order_by=counter",
			"targetBlank": true,
		}}}})
}
