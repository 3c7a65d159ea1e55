package ship

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a leaf certificate for loopback (server) or a client, and
// returns it with its key as PEM.
func (ca *testCA) issue(t *testing.T, cn string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// writePrivate writes b to name in dir with mode 0600 and returns its path.
func writePrivate(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// tlsServer starts an HTTPS server on loopback with a certificate of ca;
// clientCA, when not nil, makes it require a client certificate of it.
func tlsServer(t *testing.T, ca, clientCA *testCA, h http.Handler) *httptest.Server {
	t.Helper()
	certPEM, keyPEM := ca.issue(t, "peakline-server", x509.ExtKeyUsageServerAuth)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(h)
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	if clientCA != nil {
		pool := x509.NewCertPool()
		pool.AddCert(clientCA.cert)
		ts.TLS.ClientAuth = tls.RequireAndVerifyClientCert
		ts.TLS.ClientCAs = pool
	}
	ts.Config.ErrorLog = slog.NewLogLogger(slog.DiscardHandler, slog.LevelError)
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts
}

// headerRecorder answers 200 with the client certificate's common name
// and records the Authorization header of every request.
type headerRecorder struct {
	mu   sync.Mutex
	auth []string
}

func (h *headerRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.auth = append(h.auth, r.Header.Get("Authorization"))
	h.mu.Unlock()
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		_, _ = io.WriteString(w, r.TLS.PeerCertificates[0].Subject.CommonName)
	}
}

func (h *headerRecorder) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.auth...)
}

// get does one GET through tr and returns the status and body.
func get(tr *Transport, u string) (int, string, error) {
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(u)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func TestTransportTokenOverTLS(t *testing.T) {
	ca := newTestCA(t, "test CA")
	rec := &headerRecorder{}
	ts := tlsServer(t, ca, nil, rec)
	dir := t.TempDir()
	tokenFile := writePrivate(t, dir, "token", []byte("  s3cr3t-Token.1~\n\n"))
	caFile := writePrivate(t, dir, "ca.pem", ca.pem)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))

	tr, err := NewTransport(TransportConfig{TokenFile: tokenFile, CAFile: caFile}, ts.URL, log)
	if err != nil {
		t.Fatal(err)
	}
	code, _, err := get(tr, ts.URL+"/api/v1/jobs")
	if err != nil || code != 200 {
		t.Fatalf("GET over TLS with --ca-file: %d %v", code, err)
	}
	if got := rec.seen(); len(got) != 1 || got[0] != "Bearer s3cr3t-Token.1~" {
		t.Fatalf("Authorization headers %q, want one %q", got, "Bearer s3cr3t-Token.1~")
	}
	if logs.Len() != 0 {
		t.Fatalf("logged for a 0600 token file over https:\n%s", logs.String())
	}

	// Without --ca-file the test CA is not trusted: the system pool does not
	// hold it, and nothing reaches the handler.
	tr, err = NewTransport(TransportConfig{TokenFile: tokenFile}, ts.URL, log)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = get(tr, ts.URL+"/api/v1/jobs")
	var verr *tls.CertificateVerificationError
	if !errors.As(err, &verr) {
		t.Fatalf("GET without --ca-file: %v, want a certificate verification error", err)
	}
	if n := len(rec.seen()); n != 1 {
		t.Fatalf("%d requests reached the handler, want still 1", n)
	}
	if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(logs.String(), "s3cr3t") {
		t.Fatalf("the token leaked into an error or the log: %v\n%s", err, logs.String())
	}
}

func TestTransportMutualTLS(t *testing.T) {
	serverCA, clientCA, otherCA := newTestCA(t, "server CA"), newTestCA(t, "client CA"), newTestCA(t, "other CA")
	rec := &headerRecorder{}
	ts := tlsServer(t, serverCA, clientCA, rec)
	dir := t.TempDir()
	caFile := writePrivate(t, dir, "ca.pem", serverCA.pem)
	certPEM, keyPEM := clientCA.issue(t, "collector-7", x509.ExtKeyUsageClientAuth)
	certFile, keyFile := writePrivate(t, dir, "client.pem", certPEM), writePrivate(t, dir, "client.key", keyPEM)
	otherCert, otherKey := otherCA.issue(t, "intruder", x509.ExtKeyUsageClientAuth)
	otherCertFile, otherKeyFile := writePrivate(t, dir, "other.pem", otherCert), writePrivate(t, dir, "other.key", otherKey)

	f := func(cfg TransportConfig, wantCN string) {
		t.Helper()
		before := len(rec.seen())
		tr, err := NewTransport(cfg, ts.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		code, body, err := get(tr, ts.URL+"/")
		if wantCN == "" {
			if err == nil {
				t.Fatalf("%+v: answered %d %q, want the TLS handshake to fail", cfg, code, body)
			}
			if n := len(rec.seen()); n != before {
				t.Fatalf("%+v: a request without an accepted client certificate reached the handler", cfg)
			}
			return
		}
		if err != nil || code != 200 || body != wantCN {
			t.Fatalf("%+v: %d %q %v, want 200 %q", cfg, code, body, err, wantCN)
		}
	}
	f(TransportConfig{CAFile: caFile, CertFile: certFile, KeyFile: keyFile}, "collector-7")
	f(TransportConfig{CAFile: caFile}, "")
	f(TransportConfig{CAFile: caFile, CertFile: otherCertFile, KeyFile: otherKeyFile}, "")
}

// A redirect to another origin must not carry the token, nor one from
// https to http on the same host.
func TestTransportTokenOnlyToServer(t *testing.T) {
	other := &headerRecorder{}
	otherTS := httptest.NewServer(other)
	defer otherTS.Close()
	server := &headerRecorder{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/away" {
			http.Redirect(w, r, otherTS.URL+"/landed", http.StatusFound)
			return
		}
		server.ServeHTTP(w, r)
	}))
	defer ts.Close()
	tokenFile := writePrivate(t, t.TempDir(), "token", []byte("tok"))
	tr, err := NewTransport(TransportConfig{TokenFile: tokenFile}, ts.URL+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, err := get(tr, ts.URL+"/here"); err != nil || code != 200 {
		t.Fatalf("GET /here: %d %v", code, err)
	}
	if code, _, err := get(tr, ts.URL+"/away"); err != nil || code != 200 {
		t.Fatalf("GET /away: %d %v", code, err)
	}
	if got := server.seen(); len(got) != 1 || got[0] != "Bearer tok" {
		t.Fatalf("server saw Authorization %q, want one %q", got, "Bearer tok")
	}
	if got := other.seen(); len(got) != 1 || got[0] != "" {
		t.Fatalf("the redirect target saw Authorization %q, want one request without", got)
	}
}

func TestNewTransportRefuses(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "test CA")
	certPEM, keyPEM := ca.issue(t, "c", x509.ExtKeyUsageClientAuth)
	certFile, keyFile := writePrivate(t, dir, "c.pem", certPEM), writePrivate(t, dir, "c.key", keyPEM)
	f := func(cfg TransportConfig, server string, want ...string) {
		t.Helper()
		tr, err := NewTransport(cfg, server, nil)
		if err == nil {
			t.Fatalf("%+v %s: made a transport %v, want an error containing %q", cfg, server, tr, want)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("%+v %s: error %q does not contain %q", cfg, server, err, w)
			}
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Fatalf("error %q shows the token", err)
		}
	}
	missing := filepath.Join(dir, "no-such-token")
	f(TransportConfig{TokenFile: missing}, "https://h", "--token-file", missing, "no such file")
	empty := writePrivate(t, dir, "empty", nil)
	f(TransportConfig{TokenFile: empty}, "https://h", "--token-file", empty, "is empty")
	blank := writePrivate(t, dir, "blank", []byte(" \n\t\n"))
	f(TransportConfig{TokenFile: blank}, "https://h", "--token-file", blank, "is empty")
	twoLines := writePrivate(t, dir, "two", []byte("s3cr3t\nother\n"))
	f(TransportConfig{TokenFile: twoLines}, "https://h", "--token-file", twoLines, "one line")
	spaced := writePrivate(t, dir, "spaced", []byte("Bearer s3cr3t\n"))
	f(TransportConfig{TokenFile: spaced}, "https://h", "--token-file", spaced, "one line")
	f(TransportConfig{CertFile: certFile}, "https://h", "--cert-file and --key-file")
	f(TransportConfig{KeyFile: keyFile}, "https://h", "--cert-file and --key-file")
	f(TransportConfig{CertFile: certFile, KeyFile: certFile}, "https://h", "--cert-file "+certFile, "--key-file "+certFile)
	noCA := writePrivate(t, dir, "no-ca.pem", []byte("not a certificate\n"))
	f(TransportConfig{CAFile: noCA}, "https://h", "--ca-file", noCA, "no PEM certificate")
	f(TransportConfig{CAFile: missing}, "https://h", "--ca-file", missing)
	f(TransportConfig{}, "127.0.0.1:1", "--server", "http:// or https://")
	f(TransportConfig{}, "ftp://h", "--server", "http:// or https://")
}

func TestNewTransportWarns(t *testing.T) {
	dir := t.TempDir()
	private := writePrivate(t, dir, "private", []byte("s3cr3t"))
	shared := writePrivate(t, dir, "shared", []byte("s3cr3t"))
	if err := os.Chmod(shared, 0o640); err != nil {
		t.Fatal(err)
	}
	f := func(cfg TransportConfig, server string, want ...string) {
		t.Helper()
		var logs bytes.Buffer
		if _, err := NewTransport(cfg, server, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
		if logs.Len() == 0 {
			lines = nil
		}
		if len(lines) != len(want) {
			t.Fatalf("%+v %s: logged %q, want %d lines containing %q", cfg, server, lines, len(want), want)
		}
		for i, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Fatalf("%+v %s: line %q does not contain %q", cfg, server, lines[i], w)
			}
		}
		if strings.Contains(logs.String(), "s3cr3t") {
			t.Fatalf("the log shows the token:\n%s", logs.String())
		}
	}
	f(TransportConfig{TokenFile: private}, "https://peakline.example")
	f(TransportConfig{TokenFile: private}, "http://127.0.0.1:1")
	f(TransportConfig{TokenFile: private}, "http://[::1]:1")
	f(TransportConfig{TokenFile: private}, "http://LocalHost:1/")
	f(TransportConfig{}, "http://peakline.example")
	f(TransportConfig{TokenFile: private}, "http://peakline.example:8080", "goes in clear")
	f(TransportConfig{TokenFile: private}, "http://10.0.0.1", "goes in clear")
	f(TransportConfig{TokenFile: shared}, "https://peakline.example", `chmod 600 it" token_file=`+shared+" mode=-rw-r-----")
	f(TransportConfig{TokenFile: shared}, "http://peakline.example", "chmod 600", "goes in clear")
	world := writePrivate(t, dir, "world", []byte("s3cr3t"))
	if err := os.Chmod(world, 0o604); err != nil {
		t.Fatal(err)
	}
	f(TransportConfig{TokenFile: world}, "https://peakline.example", "chmod 600 it")

	// The packages' layout: owned by another user (root), readable by the
	// reader's group (peakline), so the reader can read but not rewrite it.
	if os.Geteuid() != 0 {
		t.Log("not root: the files owned by another user are not tested")
		return
	}
	other := 4242
	groupOwn := writePrivate(t, dir, "group-own", []byte("s3cr3t"))
	groupOther := writePrivate(t, dir, "group-other", []byte("s3cr3t"))
	for file, gid := range map[string]int{groupOwn: os.Getegid(), groupOther: os.Getegid() + 4243} {
		if err := os.Chown(file, other, gid); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(file, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	f(TransportConfig{TokenFile: groupOwn}, "https://peakline.example")
	f(TransportConfig{TokenFile: groupOther}, "https://peakline.example", "chmod 600 it")
}

// A 401 or 403 answer to a batch is an *AuthError naming the token file
// and carrying the server's message, and the transport remembers the
// first one.
func TestClientAuthRefusal(t *testing.T) {
	var mu sync.Mutex
	answer := http.StatusUnauthorized
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		code := answer
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, `{"error": "answer `+http.StatusText(code)+`"}`)
	}))
	defer ts.Close()
	tokenFile := writePrivate(t, t.TempDir(), "token", []byte("s3cr3t"))
	tr, err := NewTransport(TransportConfig{TokenFile: tokenFile}, ts.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &Client{BaseURL: ts.URL, HTTP: &http.Client{Transport: tr}, TokenFile: tokenFile}
	f := func(code int, wantMsg string) {
		t.Helper()
		mu.Lock()
		answer = code
		mu.Unlock()
		err := c.Send(t.Context(), &Batch{JobID: "j"})
		var ae *AuthError
		var se *StatusError
		if !errors.As(err, &ae) || !errors.As(err, &se) || se.StatusCode != code {
			t.Fatalf("answer %d: %v, want an *AuthError wrapping a *StatusError %d", code, err, code)
		}
		if ae.Error() != wantMsg {
			t.Fatalf("answer %d: %q, want %q", code, ae.Error(), wantMsg)
		}
	}
	f(401, "server refused the token from --token-file "+tokenFile+": 401 Unauthorized: answer Unauthorized")
	f(403, "server refused the token from --token-file "+tokenFile+": 403 Forbidden: answer Forbidden")
	if r := tr.Refusal(); r == nil || r.Error() != "server refused the token from --token-file "+tokenFile+": 401 Unauthorized: answer Unauthorized" {
		t.Fatalf("Refusal() = %v, want the first answer, 401", r)
	}

	c = &Client{BaseURL: ts.URL}
	err = c.Send(t.Context(), &Batch{JobID: "j"})
	var ae *AuthError
	if !errors.As(err, &ae) || ae.Error() != "server refused a request without a token (give one with --token-file): 403 Forbidden: answer Forbidden" {
		t.Fatalf("without a token: %v", err)
	}
}

// A refused token stops the shipper after one attempt; every batch,
// queued before or after, ends in the spool, and the refusal is logged
// once. A later shipper whose token is accepted sends them all.
func TestShipperKeepsBatchesWhenRefused(t *testing.T) {
	var mu sync.Mutex
	refuse := true
	var posts int
	var bodies []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		posts++
		if refuse {
			http.Error(w, `{"error": "token lacks scope ingest"}`, http.StatusForbidden)
			return
		}
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
	}))
	defer ts.Close()
	dir := t.TempDir()
	sp, err := OpenSpool(dir, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	s := newShipper(ts.URL, ts.Client(), sp, 100, slog.New(slog.NewTextHandler(&logs, nil)))
	s.minBackoff, s.maxBackoff = time.Millisecond, time.Millisecond
	s.client.TokenFile = "/etc/peakline/read.token"
	s.Enqueue([]byte("batch 1"), 3)
	s.Enqueue([]byte("batch 2"), 4)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go s.Run(ctx)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the shipper kept running after a 403")
	}
	s.Enqueue([]byte("batch 3"), 5)
	if unsent := s.Finish(cancel, time.Second); unsent != 12 {
		t.Fatalf("finish: %d samples unsent, want 12", unsent)
	}
	mu.Lock()
	if posts != 1 {
		t.Fatalf("%d posts after a 403, want 1", posts)
	}
	mu.Unlock()
	if got := spooled(t, dir); len(got) != 3 {
		t.Fatalf("spooled %q, want 3 batches", got)
	}
	want := "server refused the token from --token-file /etc/peakline/read.token: 403 Forbidden: token lacks scope ingest; batches stay spooled in " + dir + " and are resent by a later run"
	if n := strings.Count(logs.String(), "server refused"); n != 1 || !strings.Contains(logs.String(), want) {
		t.Fatalf("log says %d times that the server refused, want once %q:\n%s", n, want, logs.String())
	}

	mu.Lock()
	refuse = false
	mu.Unlock()
	s2 := newShipper(ts.URL, ts.Client(), sp, 100, testLogger(t))
	if n := s2.LoadSpool(); n != 3 {
		t.Fatalf("LoadSpool: %d, want 3", n)
	}
	ctx2, cancel2 := context.WithCancel(t.Context())
	go s2.Run(ctx2)
	s2.Finish(cancel2, 10*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(bodies, ",") != "batch 1,batch 2,batch 3" {
		t.Fatalf("second run sent %q, want the three batches in order", bodies)
	}
	if got := spooled(t, dir); len(got) != 0 {
		t.Fatalf("spool not empty after the resend: %q", got)
	}
}
