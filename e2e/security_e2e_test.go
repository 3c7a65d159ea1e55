package e2e

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The tests of this file run the real `peakline serve --auth-file` over
// TLS and the clients with --token-file, --ca-file, --cert-file and
// --key-file. Those against a real server skip, saying so, only while
// `peakline serve` has no --auth-file; the others need no server side.

// needAuthServe skips the test when `peakline serve --help` does not list
// --auth-file: the server side of token auth and TLS is not built in.
func needAuthServe(t *testing.T) {
	t.Helper()
	out, err := exec.Command(peaklineBin(t), "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("serve --help: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--auth-file") {
		t.Skip("peakline serve has no --auth-file yet: this test needs the server side of token auth and TLS")
	}
}

// pki is a test CA writing its certificates and keys as PEM files in dir.
type pki struct {
	t      *testing.T
	dir    string
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	CAFile string
	serial int64
}

func newPKI(t *testing.T, name string) *pki {
	t.Helper()
	p := &pki{t: t, dir: t.TempDir()}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	p.cert, err = x509.ParseCertificate(der)
	must(t, err)
	p.key = key
	p.serial = 1
	p.CAFile = p.write(name+"-ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return p
}

func (p *pki) write(name string, b []byte) string {
	path := filepath.Join(p.dir, name)
	must(p.t, os.WriteFile(path, b, 0o600))
	return path
}

// issue writes a certificate for 127.0.0.1 and localhost with usage, and
// its key; it returns the two files.
func (p *pki) issue(cn string, usage x509.ExtKeyUsage) (certFile, keyFile string) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(p.t, err)
	p.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	must(p.t, err)
	kb, err := x509.MarshalECPrivateKey(key)
	must(p.t, err)
	return p.write(cn+".pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		p.write(cn+".key", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}))
}

// The tokens of the auth file every test server gets.
const (
	ingestToken = "ingest-6b1f0c9e2a7d4c31" // scopes ingest, read
	readToken   = "read-0d3a7c55e1f2b4a8"   // scope read; in the file as its SHA-256
)

// secureServer is a `peakline serve` with --auth-file and, optionally,
// TLS and a client CA, and a client that reads from it with readToken.
type secureServer struct {
	*served
	client *http.Client
	dir    string // holds the token files
}

var secureServingRE = regexp.MustCompile(`serving on https?://([0-9.:]+)/`)

// serveSecure starts `peakline serve` with the auth file and extra args.
// tls, when not nil, is the server CA: the server gets a certificate of it
// and the URL is https://; clientCA, when not nil, is required of clients.
func serveSecure(t *testing.T, tlsCA, clientCA *pki, args ...string) *secureServer {
	t.Helper()
	dir := t.TempDir()
	authFile := filepath.Join(dir, "auth.yml")
	must(t, os.WriteFile(authFile, []byte(fmt.Sprintf(`tokens:
  - name: collector
    token: %s
    scopes: [ingest, read]
  - name: grafana
    sha256: %x
    scopes: [read]
`, ingestToken, sha256.Sum256([]byte(readToken)))), 0o600))
	args = append([]string{"serve", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--auth-file", authFile}, args...)
	scheme := "http"
	tlsConf := &tls.Config{}
	if tlsCA != nil {
		scheme = "https"
		certFile, keyFile := tlsCA.issue("peakline-server", x509.ExtKeyUsageServerAuth)
		args = append(args, "--tls-cert-file", certFile, "--tls-key-file", keyFile)
		pool := x509.NewCertPool()
		pool.AddCert(tlsCA.cert)
		tlsConf.RootCAs = pool
	}
	if clientCA != nil {
		args = append(args, "--tls-client-ca-file", clientCA.CAFile)
		certFile, keyFile := clientCA.issue("test-reader", x509.ExtKeyUsageClientAuth)
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		must(t, err)
		tlsConf.Certificates = []tls.Certificate{cert}
	}
	cmd := exec.Command(peaklineBin(t), args...)
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	logs := &lockedBuffer{}
	cmd.Stderr = logs
	must(t, cmd.Start())
	s := &secureServer{served: &served{cmd: cmd, out: logs}, dir: dir}
	t.Cleanup(func() { s.stop(t) })
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if m := secureServingRE.FindStringSubmatch(sc.Text()); m != nil {
			s.URL = scheme + "://" + m[1]
			break
		}
	}
	if s.URL == "" {
		t.Fatalf("serve did not print its URL; stderr:\n%s", logs.String())
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	s.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConf}}
	return s
}

// tokenFile writes token to a new mode-600 file and returns its path.
func (s *secureServer) tokenFile(t *testing.T, name, token string) string {
	t.Helper()
	p := filepath.Join(s.dir, name)
	must(t, os.WriteFile(p, []byte(token+"\n"), 0o600))
	return p
}

// storedSamples is the number of raw samples the server holds for job,
// read with readToken; -1 when the job does not exist.
func (s *secureServer) storedSamples(t *testing.T, job string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.URL+"/api/v1/jobs/"+job+"/graph?points=10000", nil)
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+readToken)
	resp, err := s.client.Do(req)
	must(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	must(t, err)
	if resp.StatusCode == http.StatusNotFound {
		return -1
	}
	var g graphDoc
	if resp.StatusCode != 200 || json.Unmarshal(body, &g) != nil {
		t.Fatalf("graph of %s: %d %s", job, resp.StatusCode, body)
	}
	n := 0
	for _, sr := range g.Series {
		n += sr.RawSamples
	}
	return n + stallSamplesVia(t, func(path string) (int, []byte) {
		req, err := http.NewRequest(http.MethodGet, s.URL+path, nil)
		must(t, err)
		req.Header.Set("Authorization", "Bearer "+readToken)
		resp, err := s.client.Do(req)
		must(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		must(t, err)
		return resp.StatusCode, body
	}, job)
}

// takenRE reads the samples a collect run took from its summary line,
// whether the server took everything or not.
var takenRE = regexp.MustCompile(`(?:collection done|did not take every batch).* samples=(\d+)`)

// collectSecure runs `peakline collect` for job over a 1.5s command and
// returns its output and the samples it took.
func collectSecure(t *testing.T, s *secureServer, job, spool string, flags ...string) (string, int) {
	t.Helper()
	args := append([]string{"collect", "--server", s.URL, "--job", job, "--poll-interval", "50ms", "--spool-dir", spool}, flags...)
	out, err := exec.Command(peaklineBin(t), append(args, "--", "sleep", "1.5")...).CombinedOutput()
	if err != nil {
		t.Fatalf("collect: %v\n%s", err, out)
	}
	m := takenRE.FindSubmatch(out)
	if m == nil {
		t.Fatalf("collect did not report the samples it took:\n%s", out)
	}
	taken, _ := strconv.Atoi(string(m[1]))
	if taken < 3*20 {
		t.Fatalf("collect took %d samples over 1.5s at 50ms, want at least 60:\n%s", taken, out)
	}
	for _, tok := range []string{ingestToken, readToken} {
		if strings.Contains(string(out), tok) {
			t.Fatalf("collect printed a token:\n%s", out)
		}
	}
	return string(out), taken
}

// TestSecureCollectTokenOverTLS ships a job over https with a token and a
// private CA (--ca-file): every sample taken is stored.
func TestSecureCollectTokenOverTLS(t *testing.T) {
	needAuthServe(t)
	needCgroups(t)
	ca := newPKI(t, "server")
	s := serveSecure(t, ca, nil)
	out, taken := collectSecure(t, s, "tls-job", t.TempDir(),
		"--token-file", s.tokenFile(t, "ingest.token", ingestToken), "--ca-file", ca.CAFile)
	if strings.Contains(out, "server refused") || strings.Contains(out, "did not take every batch") {
		t.Fatalf("collect did not send everything:\n%s", out)
	}
	if got := s.storedSamples(t, "tls-job"); got != taken {
		t.Fatalf("server stored %d samples, collect took %d:\n%s", got, taken, out)
	}
}

// TestSecureCollectMutualTLS ships a job to a server that requires a
// client certificate of its client CA (--tls-client-ca-file); collect
// presents one with --cert-file and --key-file.
func TestSecureCollectMutualTLS(t *testing.T) {
	needAuthServe(t)
	needCgroups(t)
	serverCA, clientCA := newPKI(t, "server"), newPKI(t, "clients")
	s := serveSecure(t, serverCA, clientCA)
	certFile, keyFile := clientCA.issue("collector-1", x509.ExtKeyUsageClientAuth)
	out, taken := collectSecure(t, s, "mtls-job", t.TempDir(),
		"--token-file", s.tokenFile(t, "ingest.token", ingestToken), "--ca-file", serverCA.CAFile,
		"--cert-file", certFile, "--key-file", keyFile)
	if got := s.storedSamples(t, "mtls-job"); got != taken {
		t.Fatalf("server stored %d samples, collect took %d:\n%s", got, taken, out)
	}
}

// TestSecureCollectRefusedTokenSpools: with a read-only token every batch
// is refused (403); collect says so once, keeps them all spooled and
// exits with the command's code. A later run with an ingest token sends
// them: the first job is then stored with exactly the samples it took.
func TestSecureCollectRefusedTokenSpools(t *testing.T) {
	needAuthServe(t)
	needCgroups(t)
	ca := newPKI(t, "server")
	s := serveSecure(t, ca, nil)
	spool := t.TempDir()
	readFile := s.tokenFile(t, "read.token", readToken)
	out, taken := collectSecure(t, s, "refused-job", spool, "--token-file", readFile, "--ca-file", ca.CAFile)
	want := "server refused the token from --token-file " + readFile + ": 403"
	if n := strings.Count(out, "server refused"); n != 1 || !strings.Contains(out, want) ||
		!strings.Contains(out, "batches stay spooled in "+spool+" and are resent by a later run") {
		t.Fatalf("collect said %d times that the server refused, want once %q naming the spool %s:\n%s", n, want, spool, out)
	}
	files, err := filepath.Glob(filepath.Join(spool, "*.json.gz"))
	must(t, err)
	if len(files) == 0 {
		t.Fatalf("nothing spooled after the refusal:\n%s", out)
	}
	if got := s.storedSamples(t, "refused-job"); got != -1 {
		t.Fatalf("the refused job has %d samples stored, want none", got)
	}

	out2, taken2 := collectSecure(t, s, "later-job", spool,
		"--token-file", s.tokenFile(t, "ingest.token", ingestToken), "--ca-file", ca.CAFile)
	if got := s.storedSamples(t, "refused-job"); got != taken {
		t.Fatalf("after the later run the refused job has %d samples stored, want the %d it took:\n%s", got, taken, out2)
	}
	if got := s.storedSamples(t, "later-job"); got != taken2 {
		t.Fatalf("the later job has %d samples stored, want %d:\n%s", got, taken2, out2)
	}
	if left, _ := filepath.Glob(filepath.Join(spool, "*")); len(left) != 0 {
		t.Fatalf("spool not empty after the later run: %v", left)
	}
}

// TestSecureImportAndQuery: import --server and query --server send the
// token over TLS; a token without the scope, or none, fails the command
// with the server's refusal.
func TestSecureImportAndQuery(t *testing.T) {
	needAuthServe(t)
	ca := newPKI(t, "server")
	s := serveSecure(t, ca, nil)
	ingest, read := s.tokenFile(t, "ingest.token", ingestToken), s.tokenFile(t, "read.token", readToken)
	tree := "../testdata/ansible/recap-csv"

	out, err := run(t, "import", "--server", s.URL, "--ca-file", ca.CAFile, "--token-file", read, tree)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 || !strings.Contains(out, "peakline: ") ||
		!strings.Contains(out, "server refused the token from --token-file "+read+": 403") {
		t.Fatalf("import with a read token: %v, want a failure naming the refused token file:\n%s", err, out)
	}
	out, err = run(t, "import", "--server", s.URL, "--ca-file", ca.CAFile, "--token-file", ingest, tree)
	if err != nil {
		t.Fatalf("import with an ingest token: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`job (\S+) \(.*samples cpu=(\d+) memory=(\d+) pids=(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("import did not report its job:\n%s", out)
	}
	want := 0
	for _, n := range m[2:] {
		k, _ := strconv.Atoi(n)
		want += k
	}
	if got := s.storedSamples(t, m[1]); got != want || want == 0 {
		t.Fatalf("job %s: %d samples stored, import read %d", m[1], got, want)
	}

	expr := fmt.Sprintf(`count(peakline_cpu_percent{job_id=%q})`, m[1])
	out, err = run(t, "query", "--server", s.URL, "--ca-file", ca.CAFile, expr)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 ||
		!strings.Contains(out, "server refused a request without a token (give one with --token-file): 401") {
		t.Fatalf("query without a token: %v, want a 401 failure:\n%s", err, out)
	}
	out, err = run(t, "query", "--server", s.URL, "--ca-file", ca.CAFile, "--token-file", read, "--start", "0", "--end", strconv.FormatInt(time.Now().Unix(), 10), "--step", "87600h", expr)
	if err != nil {
		t.Fatalf("query with a read token: %v\n%s", err, out)
	}
}

// TestClientRefusalMessages runs import --server and query --server
// against a server that refuses every token (no real server side needed),
// query taking PEAKLINE_TOKEN_FILE: both exit non-zero with one line
// naming the token file and the server's reason, and never print the
// token.
func TestClientRefusalMessages(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"status": "error", "errorType": "unauthorized", "error": "unknown token"}`)
	}))
	defer ts.Close()
	tokenFile := filepath.Join(t.TempDir(), "token")
	must(t, os.WriteFile(tokenFile, []byte("wrong-9f8e7d\n"), 0o600))
	refusal := "server refused the token from --token-file " + tokenFile + ": 401 Unauthorized: unknown token\n"

	cmd := exec.Command(peaklineBin(t), "import", "--server", ts.URL, "--token-file", tokenFile, "../testdata/ansible/recap-csv")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	wantImport := `peakline: store job "ansible-perf-2026-11-30T03:39:20.072139": ` + refusal
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.HasSuffix(stderr.String(), wantImport) {
		t.Fatalf("import: %v, want exit 1 and a last line %q:\n%s", err, wantImport, stderr.String())
	}
	// The token file comes from the environment this time, as every flag can.
	cmd = exec.Command(peaklineBin(t), "query", "--server", ts.URL, "up")
	cmd.Env = append(os.Environ(), "PEAKLINE_TOKEN_FILE="+tokenFile)
	stderr.Reset()
	cmd.Stderr = &stderr
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || stderr.String() != "peakline: "+refusal {
		t.Fatalf("query: %v, want exit 1 and exactly %q, got:\n%s", err, "peakline: "+refusal, stderr.String())
	}
	if strings.Contains(stderr.String(), "wrong-9f8e7d") {
		t.Fatal("the token was printed")
	}
}
