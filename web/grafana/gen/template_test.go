package main

import (
	"strings"
	"testing"
)

// The template view: a variable over the template ids of the info
// series and, per resource, a task × run table of peaks restricted to
// the runs of $template.
func TestDashboardTemplateView(t *testing.T) {
	d := loadDashboard(t)
	var tmpl any
	for _, v := range get(t, d, "templating", "list").([]any) {
		if get(t, v, "name") == "template" {
			tmpl = v
		}
	}
	if tmpl == nil {
		t.Fatal("no template variable")
	}
	const q = "label_values(peakline_job_info, template_id)"
	if get(t, tmpl, "type") != "query" || get(t, tmpl, "query", "query") != q || get(t, tmpl, "definition") != q ||
		get(t, tmpl, "datasource", "uid") != "${datasource}" {
		t.Fatalf("template variable: %v", tmpl)
	}
	panels := map[string]any{}
	for _, p := range get(t, d, "panels").([]any) {
		panels[get(t, p, "title").(string)] = p
	}
	for _, r := range templatePeaks {
		title := r.title + " peak per task across runs of template $template"
		p, ok := panels[title]
		if !ok {
			t.Fatalf("no panel %q", title)
		}
		want := `max by (task, job_id) (max_over_time(` + r.metric + `[$__range])) * on (job_id) group_left (template_id)` +
			` (0 * max by (job_id, template_id) (max_over_time(peakline_job_info{template_id="$template"}[$__range])) + 1)`
		if get(t, p, "type") != "table" || get(t, p, "targets", 0, "expr") != want || get(t, p, "targets", 0, "instant") != true ||
			get(t, p, "targets", 0, "format") != "table" || get(t, p, "fieldConfig", "defaults", "unit") != r.unit {
			t.Fatalf("panel %s: %v", title, p)
		}
		tr := get(t, p, "transformations", 0)
		if get(t, tr, "id") != "groupingToMatrix" || get(t, tr, "options", "columnField") != "job_id" || get(t, tr, "options", "rowField") != "task" {
			t.Fatalf("panel %s transformation: %v", title, tr)
		}
		if !strings.Contains(get(t, p, "description").(string), "/templates/$template") {
			t.Errorf("panel %s does not point to the template page", title)
		}
	}
}
