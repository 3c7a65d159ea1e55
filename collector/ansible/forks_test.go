package ansible

import (
	"os"
	"path/filepath"
	"testing"
)

func TestForksFromArgs(t *testing.T) {
	f := func(want int, args ...string) {
		t.Helper()
		if got := ForksFromArgs(args); got != want {
			t.Errorf("ForksFromArgs(%q) = %d, want %d", args, got, want)
		}
	}
	f(0)
	f(0, "site.yml")
	f(10, "-f", "10", "site.yml")
	f(7, "-f7")
	f(3, "--forks", "3")
	f(4, "--forks=4")
	f(8, "--forks", "2", "-f", "8") // the last wins
	f(0, "-f")
	f(0, "-f", "zero")
	f(0, "-f", "-3")
	f(0, "--", "-f", "9")
	f(0, "--force-handlers") // a long option starting with -f is no -f
}

func TestForksFromEnv(t *testing.T) {
	if got := ForksFromEnv([]string{"PATH=/bin", "ANSIBLE_FORKS=12"}); got != 12 {
		t.Errorf("ANSIBLE_FORKS=12: %d", got)
	}
	if got := ForksFromEnv([]string{"ANSIBLE_FORKS=12", "ANSIBLE_FORKS=x"}); got != 0 {
		t.Errorf("a bad last ANSIBLE_FORKS: %d", got)
	}
	if got := ForksFromEnv(nil); got != 0 {
		t.Errorf("none: %d", got)
	}
}

func TestCmdlineForks(t *testing.T) {
	pdd := t.TempDir()
	if got := CmdlineForks(pdd); got != 0 {
		t.Errorf("no env/cmdline: %d", got)
	}
	if err := os.MkdirAll(filepath.Join(pdd, "env"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pdd, "env", "cmdline"), []byte("-v --forks 15 --diff\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := CmdlineForks(pdd); got != 15 {
		t.Errorf("--forks 15: %d", got)
	}
}
