package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// binary is the peakline binary built from this checkout for the tests.
var binary string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "peakline-deploy-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "peakline")
	build := exec.Command("go", "build", "-o", binary, "..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build peakline: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// inCI tells whether a missing tool fails a test instead of skipping it.
func inCI() bool { return os.Getenv("CI") == "true" }

// needTool finds a command on PATH, or skips the test (fails it in CI).
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if inCI() {
			t.Fatalf("%s is required under CI=true (.ci/run installs it): %v", name, err)
		}
		t.Skipf("%s not installed", name)
	}
	return p
}

// flagsParse runs the binary's COMMAND with args and --help: it fails on a
// flag the command does not have or a value its flag refuses.
func flagsParse(t *testing.T, args []string) {
	t.Helper()
	cmd := exec.Command(binary, append(append([]string{}, args...), "--help")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("peakline %s: the flags do not parse: %v\n%s", strings.Join(args, " "), err, out)
	}
}
