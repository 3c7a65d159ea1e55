package e2e

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestImportRefusesFilesItCannotBound runs `peakline import` on runner
// trees holding a named pipe, a link to /dev/zero, a link out of the tree
// or a file over --max-file-size: each import exits non-zero within
// seconds naming the file (and the flag, for the size), and stores
// nothing (the store dir is never made).
func TestImportRefusesFilesItCannotBound(t *testing.T) {
	const event = "artifacts/demo2/job_events/6-02fc0000-0001-bfc5-3899-000000000005.json"
	f := func(name string, damage func(t *testing.T, p string), extra []string, want ...string) {
		t.Run(name, func(t *testing.T) {
			root := copyTree(t, "../testdata/ansible/runner-basic")
			p := filepath.Join(root, filepath.FromSlash(event))
			damage(t, p)
			store := filepath.Join(t.TempDir(), "store")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			args := append([]string{"import", "--data", store}, extra...)
			out, err := exec.CommandContext(ctx, peaklineBin(t), append(args, root)...).CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("import did not end within 10s:\n%s", out)
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() == 0 {
				t.Fatalf("import: %v, want a non-zero exit\n%s", err, out)
			}
			for _, w := range append(want, p) {
				if !strings.Contains(string(out), w) {
					t.Errorf("output does not say %q:\n%s", w, out)
				}
			}
			if _, err := os.Stat(store); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the store dir exists after a refused import: %v", err)
			}
		})
	}
	replace := func(t *testing.T, p string) {
		t.Helper()
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	f("fifo", func(t *testing.T, p string) {
		replace(t, p)
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}, nil, "named pipe")
	f("link to /dev/zero", func(t *testing.T, p string) {
		replace(t, p)
		if err := os.Symlink("/dev/zero", p); err != nil {
			t.Fatal(err)
		}
	}, nil, "character device", "/dev/zero")
	f("link out of the tree", func(t *testing.T, p string) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "elsewhere.json")
		if err := os.WriteFile(out, b, 0o644); err != nil {
			t.Fatal(err)
		}
		replace(t, p)
		if err := os.Symlink(out, p); err != nil {
			t.Fatal(err)
		}
	}, nil, "outside", "elsewhere.json")
	f("over --max-file-size", func(t *testing.T, p string) {
		if err := os.WriteFile(p, []byte(`{"counter": 6, "event": "verbose", "created": "2026-11-30T03:39:35.979439", "stdout": "`+strings.Repeat("x", 5000)+`"}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}, []string{"--max-file-size", "4096"}, "--max-file-size", "4096")
}

// TestImportChecksEveryPathFirst imports the template runs with the glob a
// user types, `template-runs/*`, which also matches the dir's README.txt,
// make.sh and site.yml: the import fails before reading any run, naming the
// first stray file, and stores nothing; the runs alone (`100?`) import.
func TestImportChecksEveryPathFirst(t *testing.T) {
	paths, err := filepath.Glob("../testdata/ansible/template-runs/*")
	if err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(t.TempDir(), "store")
	out, err := exec.Command(peaklineBin(t), append([]string{"import", "--data", store}, paths...)...).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("import of %v: %v, want exit 1\n%s", paths, err, out)
	}
	if want := `cannot import "../testdata/ansible/template-runs/README.txt": it is a file`; !strings.Contains(string(out), want) {
		t.Errorf("output does not say %q:\n%s", want, out)
	}
	if strings.Contains(string(out), "job 1001") {
		t.Errorf("a run was read before the stray file was refused:\n%s", out)
	}
	if _, err := os.Stat(store); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the store was made (%v): something was stored", err)
	}
	runs, _ := filepath.Glob("../testdata/ansible/template-runs/100?")
	out, err = exec.Command(peaklineBin(t), append([]string{"import", "--data", store}, runs...)...).CombinedOutput()
	if err != nil || strings.Count(string(out), "stored ") != 6 {
		t.Fatalf("import of the six runs: %v\n%s", err, out)
	}
}
