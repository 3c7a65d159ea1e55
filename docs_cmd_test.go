package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestCLIDocsCurrent fails when docs/cli differs from what the commands
// say: run `make docs` after changing a command, a flag or its help.
func TestCLIDocsCurrent(t *testing.T) {
	dir := t.TempDir()
	if err := writeCLIDocs(rootCommand(io.Discard, io.Discard), dir); err != nil {
		t.Fatal(err)
	}
	want := names(t, dir)
	got := names(t, filepath.Join("docs", "cli"))
	if !slices.Equal(got, want) {
		t.Fatalf("docs/cli holds %v, the commands make %v: run make docs", got, want)
	}
	for _, n := range want {
		w, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		g, err := os.ReadFile(filepath.Join("docs", "cli", n))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(g, w) {
			t.Errorf("docs/cli/%s is not what the commands say: run make docs", n)
		}
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}
