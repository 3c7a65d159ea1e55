package deploy

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestHelmServeArgsRun starts the binary with the args the chart gives
// serve (store, auth file and port moved to a temp dir and a free
// loopback port) and checks over HTTP what a cluster sees: /healthz open
// to the probes, the API answering the Service's names with a token, and
// refusing another Host.
func TestHelmServeArgsRun(t *testing.T) {
	r := helmTemplate(t)
	args := r.statefulSets[0].Spec.Template.Spec.Containers[0].Args
	dir := t.TempDir()
	auth := filepath.Join(dir, "auth.yaml")
	if err := os.WriteFile(auth, []byte(`tokens: [{name: grafana, token: "read-token-0123456789", scopes: [read]}]`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var run []string
	for _, a := range args {
		switch {
		case a == "--data=/data":
			a = "--data=" + filepath.Join(dir, "data")
		case strings.HasPrefix(a, "--listen=0.0.0.0:"):
			a = "--listen=127.0.0.1:0"
		case strings.HasPrefix(a, "--auth-file=/etc/peakline/auth/"):
			a = "--auth-file=" + auth
		}
		run = append(run, a)
	}
	cmd := exec.Command(binary, run...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	})
	base := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`serving on (http://[^/ ]+)`)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				base <- m[1]
			}
		}
	}()
	var url string
	select {
	case url = <-base:
	case <-time.After(30 * time.Second):
		t.Fatalf("serve %v did not start within 30 s", run)
	}
	get := func(path, host, token string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", url+path, nil)
		req.Host = host
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	f := func(path, host, token string, want int) {
		t.Helper()
		if got := get(path, host, token); got != want {
			t.Errorf("GET %s Host %s token %q: %d, want %d", path, host, token, got, want)
		}
	}
	f("/healthz", "10.1.2.3:8080", "", 200) // the kubelet's probe, by pod IP
	f("/api/v1/jobs", "pl-peakline.awx-perf.svc:8080", "read-token-0123456789", 200)
	f("/api/v1/jobs", "pl-peakline:8080", "read-token-0123456789", 200)
	f("/api/v1/jobs", "pl-peakline.awx-perf.svc:8080", "", 401)
	f("/api/v1/jobs", "evil.example:8080", "read-token-0123456789", 421)
}
