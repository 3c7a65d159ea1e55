package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Flags come from the command line, else PEAKLINE_* variables, else the
// --config file; bad values name their source.
func TestSettingsSources(t *testing.T) {
	cfgFile := filepath.Join(t.TempDir(), "peakline.yml")
	must(t, os.WriteFile(cfgFile, []byte("poll-interval: 2s\nmax-queue-samples: 7\ntemplate: from-file\n"), 0o644))
	env := map[string]string{"PEAKLINE_CONFIG": cfgFile, "PEAKLINE_TEMPLATE": "from-env"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cmd := rootCommand(io.Discard, io.Discard)
	collect, _, err := cmd.Find([]string{"collect"})
	if err != nil {
		t.Fatal(err)
	}
	must(t, collect.ParseFlags([]string{"--max-queue-samples", "9"}))
	must(t, applySettings(collect, lookup))
	get := func(name string) string { return collect.Flags().Lookup(name).Value.String() }
	if get("poll-interval") != "2s" || get("max-queue-samples") != "9" || get("template") != "from-env" {
		t.Fatalf("poll-interval=%s max-queue-samples=%s template=%s, want 2s (file), 9 (flag), from-env (env)",
			get("poll-interval"), get("max-queue-samples"), get("template"))
	}
	env["PEAKLINE_POLL_INTERVAL"] = "soon"
	collect2, _, _ := rootCommand(io.Discard, io.Discard).Find([]string{"collect"})
	if err := applySettings(collect2, lookup); err == nil || !strings.Contains(err.Error(), "PEAKLINE_POLL_INTERVAL") {
		t.Fatalf("bad env value: %v, want an error naming PEAKLINE_POLL_INTERVAL", err)
	}
	must(t, os.WriteFile(cfgFile, []byte("poll-intervall: 2s\n"), 0o644))
	delete(env, "PEAKLINE_POLL_INTERVAL")
	collect3, _, _ := rootCommand(io.Discard, io.Discard).Find([]string{"collect"})
	if err := applySettings(collect3, lookup); err == nil || !strings.Contains(err.Error(), `unknown key "poll-intervall"`) {
		t.Fatalf("unknown config key: %v", err)
	}
}

// --min-free-disk takes bytes as a number or with a base-2 or metric unit.
func TestByteSizeFlag(t *testing.T) {
	f := func(in string, want int64) {
		t.Helper()
		var b byteSize
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Fatalf("Set(%q) = %d, %v, want %d", in, b, err, want)
		}
	}
	f("0", 0)
	f("1048576", 1<<20)
	f("128MiB", 128<<20)
	f("1GB", 1_000_000_000)
	f("512KiB", 512<<10)
	if b := byteSize(128 << 20); b.String() != "128MiB" {
		t.Fatalf("String() = %q, want 128MiB", b.String())
	}
}
