// Package web holds Peakline's browser UI: the static HTML, CSS and
// JavaScript of the jobs list and the job graph page, embedded in the
// binary so that `go build` alone ships them and nothing is fetched at run
// time (no CDN, no build step). It serves nothing itself: server/web.go
// registers the routes and decides the caching headers. The Grafana
// dashboard and provisioning files under web/grafana/ are separate.
package web

import (
	"embed"
	"io/fs"
)

//go:embed static
var static embed.FS

// Page file names inside Static.
const (
	JobsPage = "index.html" // GET /: the jobs Peakline holds
	JobPage  = "job.html"   // GET /jobs/{job}: one job's graph and tasks
	// GET /templates/{id}: a job template's tasks across its runs
	TemplatePage = "template.html"
)

// Static returns the UI files, rooted at web/static/: the pages above and
// the assets they load by relative name from /static/. The FS is
// read-only and safe for concurrent use.
func Static() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // unreachable: "static" is a valid, embedded directory
	}
	return sub
}
