package e2e

import (
	"os"
	"strings"
	"testing"
	"time"
)

// serve refuses a --max-future-skew that would refuse every live sample
// before it opens the store.
func TestServeMaxFutureSkewFlag(t *testing.T) {
	for _, v := range []string{"0s", "-1m"} {
		_, errOut, code := runCodeWithin(t, 10*time.Second, "serve", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--max-future-skew", v)
		if want := "peakline: --max-future-skew: must be positive, got " + map[string]string{"0s": "0s", "-1m": "-1m0s"}[v] + "\n"; code == 0 || !strings.HasSuffix(errOut, want) {
			t.Fatalf("serve --max-future-skew %s: exit %d, %q, want %q", v, code, errOut, want)
		}
	}
}

// serve names the flags to change when the store flags do not add up,
// before it opens anything.
func TestServeStoreFlags(t *testing.T) {
	dir := t.TempDir()
	f := func(want string, args ...string) {
		t.Helper()
		_, errOut, code := runCodeWithin(t, 10*time.Second, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
		if code == 0 || !strings.HasSuffix(errOut, "peakline: "+want+"\n") {
			t.Fatalf("serve %v: exit %d, %q, want %q", args, code, errOut, want)
		}
	}
	const w, q = "http://127.0.0.1:1/api/v1/write", "http://127.0.0.1:1"
	f("--data: a store directory is required (or --remote-write-url and --remote-query-url for a remote engine)")
	f("--data and --remote-write-url/--remote-query-url: give a store directory or a remote engine, not both",
		"--data", dir, "--remote-write-url", w, "--remote-query-url", q)
	f("--remote-write-url and --remote-query-url: a remote engine needs both (the remote write endpoint and the base of its Prometheus API)",
		"--remote-write-url", w)
	f("--settings: replicas over a remote engine must share one collection policy; give a file every replica reads and writes (a shared volume)",
		"--remote-write-url", w, "--remote-query-url", q)
	f("--retention: a remote engine keeps what its own retention says (VictoriaMetrics -retentionPeriod, Prometheus --storage.tsdb.retention.time); drop --retention",
		"--remote-write-url", w, "--remote-query-url", q, "--settings", dir+"/s.json", "--retention", "24h")
	f(`--remote-query-url: query URL: give the base without /api/v1 (it is appended), got "http://127.0.0.1:1/api/v1"`,
		"--remote-write-url", w, "--remote-query-url", q+"/api/v1", "--settings", dir+"/s.json")
	f(`--remote-query-url: query URL: must be the http(s) base of the Prometheus API such as http://host:8428 or http://vmselect:8481/select/0/prometheus, got "127.0.0.1:8428"`,
		"--remote-write-url", w, "--remote-query-url", "127.0.0.1:8428", "--settings", dir+"/s.json")
	f(`--remote-write-url: write URL: must be an http(s) URL such as http://host:8428/api/v1/write, got "ftp://h/api/v1/write"`,
		"--remote-write-url", "ftp://h/api/v1/write", "--remote-query-url", q, "--settings", dir+"/s.json")
	f("--remote-cache-ttl: must be positive (1ms reads the engine nearly every time), got -1s",
		"--remote-write-url", w, "--remote-query-url", q, "--settings", dir+"/s.json", "--remote-cache-ttl", "-1s")
	f("--remote-header: only with --remote-write-url and --remote-query-url (a remote engine)",
		"--data", dir, "--remote-header", "X-Scope-OrgID: a")
	f("--remote-cache-ttl: only with --remote-write-url and --remote-query-url (a remote engine)",
		"--data", dir, "--remote-cache-ttl", "1s")
	f("--remote-timeout: must be positive, got 0s",
		"--remote-write-url", w, "--remote-query-url", q, "--settings", dir+"/s.json", "--remote-timeout", "0s")
	f("--remote-memory-budget: must be at least 1048576 (1 MiB), got 1000",
		"--remote-write-url", w, "--remote-query-url", q, "--settings", dir+"/s.json", "--remote-memory-budget", "1000")
	f("--remote-memory-budget: only with --remote-write-url and --remote-query-url (a remote engine)",
		"--data", dir, "--remote-memory-budget", "1073741824")
	f("--min-free-disk: only with --data (a remote engine keeps its own disk)",
		"--remote-write-url", w, "--remote-query-url", q, "--settings", dir+"/s.json", "--min-free-disk", "1GB")
	f("--min-free-disk: must not be negative (0 turns the rule off), got -1", "--data", dir, "--min-free-disk", "-1")
	f(`invalid argument "lots" for "--min-free-disk" flag: want bytes, as a number or with a unit (128MiB, 1GB), got "lots"`,
		"--data", dir, "--min-free-disk", "lots")
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a refused serve left %d files in --data", len(entries))
	}
}
