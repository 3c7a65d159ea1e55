package grafana_test

import (
	"io/fs"
	"testing"

	"github.com/peakline/peakline/web/grafana"
)

func TestFilesEmbedded(t *testing.T) {
	for _, name := range []string{
		"dashboards/peakline.json",
		"provisioning/datasources/peakline.yaml",
		"provisioning/dashboards/peakline.yaml",
	} {
		b, err := fs.ReadFile(grafana.Files, name)
		if err != nil || len(b) == 0 {
			t.Fatalf("%s: %d bytes, %v", name, len(b), err)
		}
	}
}
