package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// spoolSamples decodes the batches spooled in dir and returns how many
// samples of job they hold, and the files' names and bodies.
func spoolSamples(t *testing.T, dir, job string) (int, map[string][]byte) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	bodies := map[string][]byte{}
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var b struct {
			JobID  string `json:"job_id"`
			Series []struct {
				T []int64 `json:"t"`
			} `json:"series"`
		}
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err == nil {
			err = json.NewDecoder(zr).Decode(&b)
		}
		if err != nil {
			t.Fatalf("spool file %s is not a whole batch: %v", filepath.Base(f), err)
		}
		if b.JobID == job {
			for _, s := range b.Series {
				n += len(s.T)
			}
		}
		bodies[filepath.Base(f)] = body
	}
	return n, bodies
}

// TestCollectKilledSpoolResent kills `peakline collect` with SIGKILL while
// the server is down and its batches go to the spool, then starts the
// server: the next collect resends every spooled batch and the server
// stores each sample of them. The same batches sent once more (a collector
// killed after the server stored a batch but before it removed the file)
// are taken with a 2xx and stored once.
func TestCollectKilledSpoolResent(t *testing.T) {
	needCgroups(t)
	addr := freeAddr(t) // nothing listens: the server is down
	spool := t.TempDir()

	// --max-queue-samples 1: every batch goes to the spool.
	cmd := exec.Command(peaklineBin(t), "collect", "--server", "http://"+addr, "--job", "killed",
		"--poll-interval", "20ms", "--max-queue-samples", "1", "--spool-dir", spool, "--", "sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the kill takes the command too
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	must(t, cmd.Start())
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, _ := filepath.Glob(filepath.Join(spool, "*.json.gz"))
		if len(m) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
			t.Fatalf("collect spooled %d batches in 30s with the server down:\n%s", len(m), logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	must(t, syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL))
	_ = cmd.Wait()
	spooled, bodies := spoolSamples(t, spool, "killed")
	if strings.Contains(logs.String(), "collection done") || spooled == 0 {
		t.Fatalf("%d samples spooled; collect was not killed mid-job?\n%s", spooled, logs.String())
	}

	s := serve(t, "--data", t.TempDir(), "--listen", addr)
	resend := func() {
		t.Helper()
		out, err := exec.Command(peaklineBin(t), "collect", "--server", s.URL, "--job", "resender",
			"--spool-dir", spool, "--", "true").CombinedOutput()
		if err != nil {
			t.Fatalf("collect: %v\n%s", err, out)
		}
		if left, _ := os.ReadDir(spool); len(left) != 0 {
			t.Fatalf("spool holds %d files after a resend with the server up:\n%s", len(left), out)
		}
	}
	stored := func() int { return s.rawSamples(t, "killed") }
	resend()
	first := stored()
	for name, body := range bodies {
		must(t, os.WriteFile(filepath.Join(spool, name), body, 0o600))
	}
	resend()
	again := stored()
	t.Logf("%d batches with %d samples spooled when collect was killed; stored %d, then %d after the same batches again",
		len(bodies), spooled, first, again)
	if first != spooled || again != spooled {
		t.Fatalf("stored %d samples, then %d after a second resend; want the %d spooled, once", first, again, spooled)
	}
}
