package history

import (
	"strings"
	"testing"
)

func factor(f float64) *float64 { return &f }

// ReportOf keeps the findings of the asked run only, regressions and
// contended apart, in task order; Print renders each in its unit.
func TestReportPrint(t *testing.T) {
	h := &History{TemplateID: "9", TemplateName: "deploy",
		Runs: []RunEntry{{JobID: "1"}, {JobID: "2"}, {JobID: "3"}, {JobID: "4"}, {JobID: "5"}},
		Tasks: []TaskEntry{
			{Key: "site.yml:4 fork", Regressions: []Regression{
				{JobID: "4", Metric: MetricDuration, Value: 1, Baseline: 1, Factor: factor(1)}, // another run's
				{JobID: "5", Metric: MetricDuration, Value: 8000, Baseline: 4000, Factor: factor(2), Contended: true,
					Stall: &Contention{Signal: StallCPU, Share: 0.6, Baseline: 0.05}},
			}},
			{Key: "site.yml:9 fill", Regressions: []Regression{
				{JobID: "5", Metric: MetricMemoryMax, Value: 640 << 20, Baseline: 200 << 20, Factor: factor(3.2)},
				{JobID: "5", Metric: MetricCPUMax, Value: 50, Baseline: 0},
			}},
		}}
	rep := ReportOf(h, "5")
	if rep.Runs != 5 || len(rep.Regressions) != 2 || len(rep.Contended) != 1 || rep.Regressions[0].Task != "site.yml:9 fill" {
		t.Fatalf("report %+v: want 5 runs, 2 regressions of the fill task, 1 contended", rep)
	}
	var out strings.Builder
	rep.Print(&out)
	want := "template 9 (deploy), job 5: 2 regressions against the other 4 runs\n" +
		"TASK             METRIC      VALUE    USUAL    FACTOR\n" +
		"site.yml:9 fill  memory_max  640.0 MiB  200.0 MiB  3.20×\n" +
		"site.yml:9 fill  cpu_max     50.0%    0.0%     -\n" +
		"1 contended (the task waited for a CPU far more or less than usual: other work on the node; no regression without --strict)\n" +
		"TASK             METRIC       VALUE  USUAL  FACTOR  WAITED     USUALLY\n" +
		"site.yml:4 fork  duration_ms  8.0 s  4.0 s  2.00×   60.0% cpu  5.0%\n"
	if norm(out.String()) != norm(want) {
		t.Errorf("printed\n%s\nwant\n%s", out.String(), want)
	}

	few := ReportOf(&History{TemplateID: "9", Runs: []RunEntry{{JobID: "1"}, {JobID: "2"}}}, "2")
	out.Reset()
	few.Print(&out)
	if want := "template 9, job 2: no regressions: too few runs to compare (1 other runs; a run needs 3)\n"; out.String() != want {
		t.Errorf("few runs: %q, want %q", out.String(), want)
	}
}

// norm makes runs of spaces one: the tables' column widths are the
// tabwriter's business.
func norm(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	return strings.Join(lines, "\n")
}
