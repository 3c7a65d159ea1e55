package collector_test

import (
	"go/build"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/peakline/peakline"

// allowed maps each collector package (relative to the module) to the
// Peakline packages its non-test files may import: the map in doc.go.
var allowed = map[string][]string{
	"collector":               {},
	"collector/ansible":       {},
	"collector/cgroup":        {},
	"collector/ship":          {"collector/ansible"},
	"collector/live":          {"collector/ansible", "collector/ship", "collector/cgroup"},
	"collector/awx":           {"collector/ansible", "collector/ship"},
	"collector/awx/awxtest":   {},
	"collector/ship/shiptest": {},
	"collector/testscale":     {},
	"collector/progress":      {},
	"collector/discover":      {},
	"collector/agent":         {"collector/ansible", "collector/awx", "collector/cgroup", "collector/discover", "collector/live", "collector/ship"},
}

// TestImportArrows reads the imports of every package under collector/ (as
// this platform builds them) and fails on an import doc.go does not allow,
// on a package doc.go does not list, and on any file, tests included,
// importing a Peakline package outside collector/ (the server side).
func TestImportArrows(t *testing.T) {
	var seen []string
	err := filepath.WalkDir(".", func(dir string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if d.Name() == "testdata" {
			return filepath.SkipDir
		}
		pkg, err := build.ImportDir(dir, 0)
		if _, ok := err.(*build.NoGoError); ok {
			return nil
		}
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(filepath.Join("collector", dir))
		seen = append(seen, rel)
		want, ok := allowed[rel]
		if !ok {
			t.Errorf("package %s is not in the map: add it to doc.go and to allowed here", rel)
		}
		for _, imp := range pkg.Imports {
			p, ours := strings.CutPrefix(imp, module+"/")
			if imp == module || (ours && !strings.HasPrefix(p, "collector/")) {
				t.Errorf("%s imports %s: the collector imports nothing of the server side", rel, imp)
			} else if ours && ok && !slices.Contains(want, p) {
				t.Errorf("%s imports %s; it may import only %v", rel, p, want)
			}
		}
		for _, imp := range append(pkg.TestImports, pkg.XTestImports...) {
			p, ours := strings.CutPrefix(imp, module+"/")
			if imp == module || (ours && !strings.HasPrefix(p, "collector/")) {
				t.Errorf("a test of %s imports %s: the collector's tests use no server-side package", rel, imp)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The walk found every package the map names: a check over a wrong
	// directory would pass vacuously.
	for p := range allowed {
		if !slices.Contains(seen, p) {
			t.Errorf("package %s of the map was not found under collector/", p)
		}
	}
}
