package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrMissingTool is wrapped by the error for a peer binary that is not
// installed.
var ErrMissingTool = errors.New("peer binary not found: run make tools")

// Peer binaries, by the names `make tools` installs them under.
const (
	toolPrometheus = "prometheus"
	toolVM         = "victoria-metrics"
)

// FindTool looks for a peer binary beside the running executable (where
// `make tools` puts it next to bin/peakline), in ./bin, then in PATH.
func FindTool(name string) (string, error) {
	var dirs []string
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Dir(exe))
	}
	if wd, err := os.Getwd(); err == nil {
		// From the module root, and from a package dir under it (go test).
		dirs = append(dirs, filepath.Join(wd, "bin"), filepath.Join(wd, "..", "bin"))
	}
	names := []string{name}
	if name == toolVM {
		names = append(names, "victoria-metrics-prod")
	}
	for _, d := range dirs {
		for _, n := range names {
			p := filepath.Join(d, n)
			if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
				return p, nil
			}
		}
	}
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w (%s not beside the peakline binary, in ./bin or in PATH)", ErrMissingTool, name)
}

// proc is a server process on a loopback port with its own data dir.
type proc struct {
	name string
	url  string // http://127.0.0.1:PORT
	dir  string // data dir
	cmd  *exec.Cmd
	done chan struct{}
	err  error // of Wait, once done is closed
	logs *tailBuffer
}

// freeAddr returns a loopback address with a port free at the time.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startProc starts bin with args built from a fresh loopback address and
// waits until readyPath answers 200.
func startProc(ctx context.Context, name, dir, bin string, env []string, args func(addr string) []string, readyPath string) (*proc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	p := &proc{name: name, url: "http://" + addr, dir: dir, done: make(chan struct{}), logs: &tailBuffer{max: 16 << 10}}
	p.cmd = exec.Command(bin, args(addr)...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := http.Get(p.url + readyPath)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("%s exited before it was ready: %v\n%s", name, p.err, p.logs)
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("%s not ready after 90s:\n%s", name, p.logs)
		}
	}
}

// stop sends SIGTERM, waits up to a minute for a clean exit, then kills.
func (p *proc) stop() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within a minute of SIGTERM; killed", p.name)
	}
	var ee *exec.ExitError
	if p.err != nil && !errors.As(p.err, &ee) {
		return p.err
	}
	return nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// startPrometheus runs a Prometheus server with an empty scrape config,
// the remote-write receiver and the admin API (for snapshots).
func startPrometheus(ctx context.Context, bin, dir string) (*proc, error) {
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte("global:\n  scrape_interval: 15s\n"), 0o644); err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	p, err := startProc(ctx, "prometheus", data, bin, nil, func(addr string) []string {
		return []string{"--config.file=" + cfg, "--storage.tsdb.path=" + data, "--web.listen-address=" + addr,
			"--web.enable-remote-write-receiver", "--web.enable-admin-api", "--log.level=warn"}
	}, "/-/ready")
	return p, err
}

// startVM runs VictoriaMetrics single-node.
func startVM(ctx context.Context, bin, dir string) (*proc, error) {
	return startProc(ctx, "victoriametrics", dir, bin, nil, func(addr string) []string {
		return []string{"-storageDataPath=" + dir, "-httpListenAddr=" + addr, "-retentionPeriod=100y", "-loggerLevel=WARN"}
	}, "/health")
}

// startPeakline runs `peakline serve` from the running executable (the
// peakline binary, or a test binary that acts as one; see main_test.go).
func startPeakline(ctx context.Context, dir string) (*proc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return startProc(ctx, "peakline", dir, exe, nil, func(addr string) []string {
		return []string{"serve", "--data", dir, "--listen", addr, "--log-level", "warn"}
	}, "/healthz")
}

// post sends one body and fails on a non-2xx answer.
func post(ctx context.Context, client *http.Client, url string, headers map[string]string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %d: %s", url, resp.StatusCode, strings.TrimSpace(string(msg)))
	}
	return nil
}

// scrape reads a Prometheus text exposition and returns the sum of the
// samples of each family asked for (all label sets), NaN-free: missing
// families are absent from the map.
func scrape(ctx context.Context, url string, names ...string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	// Plain text: peakline serve's /metrics is gzipped twice (promhttp and
	// the echo middleware) when the client accepts gzip.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d", url, resp.StatusCode)
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name := line
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name = line[:i]
		}
		if !want[name] {
			continue
		}
		f := strings.Fields(line[len(name):])
		if i := strings.LastIndexByte(line, '}'); i >= 0 {
			f = strings.Fields(line[i+1:])
		}
		if len(f) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(f[0], 64); err == nil {
			out[name] += v
		}
	}
	return out, sc.Err()
}

// promSnapshot asks Prometheus for a snapshot including its head and
// returns the snapshot's directory.
func promSnapshot(ctx context.Context, p *proc) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url+"/api/v1/admin/tsdb/snapshot?skip_head=false", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var doc struct {
		Data struct {
			Name string `json:"name"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != http.StatusOK || doc.Data.Name == "" {
		return "", fmt.Errorf("prometheus snapshot: status %d: %v", resp.StatusCode, err)
	}
	return filepath.Join(p.dir, "snapshots", doc.Data.Name), nil
}

// vmFlushMerge flushes VictoriaMetrics' in-memory parts to disk and
// force-merges every partition, waiting for the merge to end.
func vmFlushMerge(ctx context.Context, p *proc) error {
	for _, path := range []string{"/internal/force_flush", "/internal/force_merge"} {
		if err := vmInternal(ctx, p.url+path); err != nil {
			return err
		}
	}
	// The merge runs in the background and is counted by
	// vm_active_force_merges once started: wait for it to show and end,
	// then for the data dir to stop changing.
	time.Sleep(time.Second)
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		m, err := scrape(ctx, p.url+"/metrics", "vm_active_force_merges")
		if err != nil {
			return err
		}
		if m["vm_active_force_merges"] == 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	last := int64(-1)
	for time.Now().Before(deadline) {
		n := dirSize(p.dir, vmStorageFile)
		if n == last {
			return nil
		}
		last = n
		time.Sleep(time.Second)
	}
	return errors.New("victoriametrics: force merge did not finish within 10 minutes")
}

// vmSettle flushes VictoriaMetrics' buffers and waits (up to a minute)
// until it counts want rows added to storage: it buffers rows in memory
// before counting them.
func vmSettle(ctx context.Context, p *proc, want int) error {
	deadline := time.Now().Add(time.Minute)
	for {
		if err := vmInternal(ctx, p.url+"/internal/force_flush"); err != nil {
			return err
		}
		m, err := scrape(ctx, p.url+"/metrics", "vm_rows_added_to_storage_total")
		if err != nil {
			return err
		}
		if int(m["vm_rows_added_to_storage_total"]) >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("victoriametrics: %v of %d rows in storage after a minute", m["vm_rows_added_to_storage_total"], want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func vmInternal(ctx context.Context, url string) error {
	for _, method := range []string{http.MethodPost, http.MethodGet} {
		req, err := http.NewRequestWithContext(ctx, method, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode/100 == 2 {
			return nil
		}
		if resp.StatusCode != http.StatusMethodNotAllowed {
			return fmt.Errorf("%s %s: %d", method, url, resp.StatusCode)
		}
	}
	return fmt.Errorf("%s: no method accepted", url)
}

// vmStorageFile keeps what VictoriaMetrics stores samples and their index
// in (data/ and indexdb/), not its caches or snapshots.
func vmStorageFile(rel string) bool {
	return strings.HasPrefix(rel, "data"+string(filepath.Separator)) || strings.HasPrefix(rel, "indexdb"+string(filepath.Separator))
}

// blockFile keeps the files of a Prometheus TSDB's blocks (ULID dirs),
// not its WAL, head chunks or lock.
func blockFile(rel string) bool {
	first, _, found := strings.Cut(rel, string(filepath.Separator))
	return found && len(first) == 26 && first != "chunks_head"
}

// dirSize adds up the sizes of the regular files under root whose path
// relative to root keep accepts (nil keeps all).
func dirSize(root string, keep func(rel string) bool) int64 {
	var n int64
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		if keep != nil && !keep(rel) {
			return nil
		}
		if info, err := d.Info(); err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
		return nil
	})
	return n
}

// procStat is what /proc tells of a process: resident memory and CPU time.
type procStat struct {
	rss int64         // bytes
	cpu time.Duration // user + system
}

// readProc reads /proc/PID/status and /proc/PID/stat.
func readProc(pid int) (procStat, error) {
	var st procStat
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			st.rss = kb << 10
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return st, err
	}
	// Fields after the command name, which is in parentheses and may
	// hold spaces: state is field 3, utime 14, stime 15.
	rest := string(stat)
	rest = rest[strings.LastIndexByte(rest, ')')+2:]
	f := strings.Fields(rest)
	if len(f) < 13 {
		return st, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	stt, _ := strconv.ParseInt(f[12], 10, 64)
	// USER_HZ is 100 on Linux.
	st.cpu = time.Duration(ut+stt) * 10 * time.Millisecond
	return st, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
