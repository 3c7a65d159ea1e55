package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// runExit runs the binary with extra environment variables and returns
// its exit code, stdout and stderr.
func runExit(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(peaklineBin(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), stderr.String()
	}
	t.Fatalf("peakline %v: %v", args, err)
	return 0, "", ""
}

// Every usage, flag, config and environment error exits 2 in every
// command, with a message naming the flag, key or variable; a failure
// that is none of them exits 1 (regressions: 2, as its help says).
func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	typo := filepath.Join(dir, "typo.yaml")
	if err := os.WriteFile(typo, []byte("no-such-key: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.yaml")
	data := t.TempDir()

	// Each command with arguments that are valid but for the error under
	// test (collect and agent never get to run anything), a flag it
	// takes with a typed value and that flag's environment variable.
	type command struct {
		args          []string
		typedFlag     string // takes a number or a duration
		env           string // the variable of typedFlag
		strayArgs     []string
		semantic      []string // args with a value the command refuses itself
		semanticNames string
	}
	commands := map[string]command{
		"import": {args: []string{"import", "--data", data, "../testdata/ansible/runner-basic"}, typedFlag: "--max-file-size", env: "PEAKLINE_MAX_FILE_SIZE",
			semantic: []string{"import", "../testdata/ansible/runner-basic"}, semanticNames: "--data or --server"},
		"collect": {args: []string{"collect", "--server", "http://127.0.0.1:1", "--", "true"}, typedFlag: "--poll-interval", env: "PEAKLINE_POLL_INTERVAL",
			semantic: []string{"collect", "--", "true"}, semanticNames: "--server"},
		"query": {args: []string{"query", "--data", data, "up"}, typedFlag: "--step", env: "PEAKLINE_STEP",
			strayArgs: []string{"query", "--data", data, "up", "stray"},
			semantic:  []string{"query", "--data", data, "--time", "yesterday", "up"}, semanticNames: "--time"},
		"regressions": {args: []string{"regressions", "--server", "http://127.0.0.1:1", "--template", "7"}, typedFlag: "--last", env: "PEAKLINE_LAST",
			strayArgs: []string{"regressions", "--server", "http://127.0.0.1:1", "--template", "7", "stray"},
			semantic:  []string{"regressions", "--server", "http://127.0.0.1:1", "--template", "7", "--last", "2"}, semanticNames: "--last"},
		"agent": {args: []string{"agent", "--server", "http://127.0.0.1:1"}, typedFlag: "--poll-interval", env: "PEAKLINE_POLL_INTERVAL",
			strayArgs: []string{"agent", "--server", "http://127.0.0.1:1", "stray"}},
		"serve": {args: []string{"serve", "--data", data, "--listen", "127.0.0.1:0"}, typedFlag: "--retention", env: "PEAKLINE_RETENTION",
			strayArgs: []string{"serve", "--data", data, "--listen", "127.0.0.1:0", "stray"},
			semantic:  []string{"serve", "--data", data, "--listen", "127.0.0.1:0", "--awx-ui-url", "awx.example"}, semanticNames: "--awx-ui-url"},
		"bench": {args: []string{"bench", "downsample", "--sizes", "1e3"}, typedFlag: "--rounds", env: "PEAKLINE_ROUNDS",
			strayArgs: []string{"bench", "downsample", "stray"},
			semantic:  []string{"bench", "downsample", "--rounds", "0"}, semanticNames: "--rounds"},
	}
	f := func(name string, env []string, args []string, want int, names string) {
		t.Helper()
		code, _, stderr := runExit(t, env, args...)
		if code != want || !strings.Contains(stderr, names) {
			t.Errorf("%s: peakline %q (env %q) exited %d, stderr %q; want %d naming %q", name, args, env, code, stderr, want, names)
		}
	}
	for name, c := range commands {
		with := func(extra ...string) []string {
			// Flags go before a "--" ending collect's own.
			out := append([]string{}, c.args...)
			if i := slicesIndex(out, "--"); i >= 0 {
				return append(append(out[:i:i], extra...), c.args[i:]...)
			}
			return append(out, extra...)
		}
		t.Run(name, func(t *testing.T) {
			f("unknown flag", nil, with("--no-such-flag"), 2, "unknown flag: --no-such-flag")
			f("bad flag value", nil, with(c.typedFlag, "many"), 2, c.typedFlag)
			f("bad log level", nil, with("--log-level", "loud"), 2, "--log-level")
			f("missing config file", nil, with("--config", missing), 2, "--config")
			f("config key typo", nil, with("--config", typo), 2, `unknown key "no-such-key"`)
			f("bad environment value", []string{c.env + "=many"}, c.args, 2, c.env)
			f("missing config file from the environment", []string{"PEAKLINE_CONFIG=" + missing}, c.args, 2, "--config")
			if c.strayArgs != nil {
				names := `unknown command "stray"`
				if name == "query" {
					names = "accepts 1 arg(s), received 2"
				}
				f("stray argument", nil, c.strayArgs, 2, names)
			}
			if c.semantic != nil {
				f("refused value", nil, c.semantic, 2, c.semanticNames)
			}
		})
	}
	f("unknown command", nil, []string{"nosuch"}, 2, `unknown command "nosuch"`)
	f("unknown bench command", nil, []string{"bench", "nosuch"}, 2, `unknown command "nosuch"`)
	f("unknown shell of completion", nil, []string{"completion", "nosuch"}, 2, `unknown command "nosuch"`)
	f("help", nil, []string{"--help"}, 0, "")
	// Failures that are no usage error.
	f("a path that does not exist", nil, []string{"import", "--data", data, filepath.Join(dir, "no-such-tree")}, 1, "no-such-tree")
	f("a server that cannot be asked", nil, []string{"regressions", "--server", "http://127.0.0.1:1", "--template", "7"}, 2, "127.0.0.1:1")
}

func slicesIndex(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// Off a terminal, import reports its progress in plain lines: no
// carriage return, no escape sequence, one line when a tree is read.
func TestImportProgressPlain(t *testing.T) {
	for _, target := range []string{"--data", "--server"} {
		dest := t.TempDir()
		if target == "--server" {
			dest = serve(t, "--data", dest).URL
		}
		code, stdout, stderr := runExit(t, nil, "import", target, dest, "../testdata/ansible/runner-basic", "../testdata/ansible/runner-loops")
		if code != 0 {
			t.Fatalf("import %s: %d\n%s%s", target, code, stdout, stderr)
		}
		all := stdout + stderr
		if strings.ContainsAny(all, "\r\x1b") {
			t.Fatalf("import %s wrote a carriage return or an escape sequence:\n%q", target, all)
		}
		for _, tree := range []string{"runner-basic", "runner-loops"} {
			re := regexp.MustCompile(`(?m)^reading \.\./testdata/ansible/` + tree + `: (\d+) of (\d+) files \(100%\), done in `)
			m := re.FindStringSubmatch(stderr)
			if m == nil || m[1] != m[2] {
				t.Errorf("import %s: no plain line for %s:\n%s", target, tree, stderr)
			}
		}
	}
}
