package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/peakline/peakline/server"
	"github.com/peakline/peakline/tsdb"
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
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a leaf for the names (DNS names or IPs) and returns its
// PEM certificate and key.
func (ca *testCA) issue(t *testing.T, serial int64, usage x509.ExtKeyUsage, names ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: names[0]},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// serveTLS runs the server with cfg on a loopback TLS listener until the
// test ends and returns its https URL.
func serveTLS(t *testing.T, tlsCfg *tls.Config, sec server.SecurityConfig) string {
	t.Helper()
	store, err := tsdb.Open(t.TempDir(), tsdb.Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Security: sec}, store, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, tls.NewListener(ln, tlsCfg)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		_ = store.Close()
	})
	return "https://" + ln.Addr().String()
}

func httpsClient(roots *x509.CertPool, certs ...tls.Certificate) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs}}}
}

// TestTLSServeAndReload: HTTPS with a certificate made here, the names of
// the certificate allowed as Host, TLS 1.1 refused, and a renewed
// certificate served on the next handshake without a restart.
func TestTLSServeAndReload(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "peakline test CA")
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	c, k := ca.issue(t, 10, x509.ExtKeyUsageServerAuth, "peakline.test", "127.0.0.1")
	writeFile(t, certFile, c)
	writeFile(t, keyFile, k)
	tlsCfg, names, err := server.NewTLSConfig(server.TLSFiles{CertFile: certFile, KeyFile: keyFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names, []string{"peakline.test", "127.0.0.1"}) {
		t.Fatalf("certificate names %q", names)
	}
	if hosts := server.DefaultAllowedHosts("127.0.0.1", names); !slices.Equal(hosts, []string{"127.0.0.1", "::1", "localhost", "peakline.test"}) {
		t.Fatalf("allowed hosts %q", hosts)
	}
	base := serveTLS(t, tlsCfg, server.SecurityConfig{AllowedHosts: server.DefaultAllowedHosts("127.0.0.1", names)})
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	client := httpsClient(roots)
	serial := func() int64 {
		t.Helper()
		client.CloseIdleConnections()
		resp, err := client.Get(base + "/api/v1/jobs")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Strict-Transport-Security") == "" {
			t.Fatalf("GET over TLS: %d, HSTS %q", resp.StatusCode, resp.Header.Get("Strict-Transport-Security"))
		}
		return resp.TLS.PeerCertificates[0].SerialNumber.Int64()
	}
	if got := serial(); got != 10 {
		t.Fatalf("serial %d, want 10", got)
	}
	// A plain-HTTP client gets no answer it can read.
	if resp, err := http.Get("http" + base[len("https"):] + "/healthz"); err == nil && resp.StatusCode == 200 {
		t.Fatal("plain HTTP was answered with 200 on the TLS port")
	}
	old := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MaxVersion: tls.VersionTLS11}}}
	if _, err := old.Get(base + "/healthz"); err == nil {
		t.Fatal("a TLS 1.1 client was served")
	}
	// Renew: the key first, then the certificate (as tools do); both
	// must change size or time for the handshake to notice.
	c2, k2 := ca.issue(t, 11, x509.ExtKeyUsageServerAuth, "peakline.test", "127.0.0.1")
	writeFile(t, keyFile, k2)
	if got := serial(); got != 10 {
		t.Fatalf("with a new key but the old certificate: serial %d, want the old pair (10)", got)
	}
	writeFile(t, certFile, c2)
	future := time.Now().Add(time.Minute)
	if err := os.Chtimes(certFile, future, future); err != nil {
		t.Fatal(err)
	}
	if got := serial(); got != 11 {
		t.Fatalf("after renewal: serial %d, want 11", got)
	}
}

// TestTLSMutual: with a client CA, a client without a certificate, or
// with one of another CA, is refused in the handshake; one signed by the
// client CA is served.
func TestTLSMutual(t *testing.T) {
	dir := t.TempDir()
	serverCA, clientCA, otherCA := newTestCA(t, "server CA"), newTestCA(t, "client CA"), newTestCA(t, "other CA")
	c, k := serverCA.issue(t, 1, x509.ExtKeyUsageServerAuth, "127.0.0.1")
	writeFile(t, filepath.Join(dir, "cert.pem"), c)
	writeFile(t, filepath.Join(dir, "key.pem"), k)
	writeFile(t, filepath.Join(dir, "clients.pem"), clientCA.pem)
	tlsCfg, _, err := server.NewTLSConfig(server.TLSFiles{
		CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem"), ClientCAFile: filepath.Join(dir, "clients.pem"),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	base := serveTLS(t, tlsCfg, server.SecurityConfig{})
	roots := x509.NewCertPool()
	roots.AddCert(serverCA.cert)
	pair := func(ca *testCA) tls.Certificate {
		c, k := ca.issue(t, 2, x509.ExtKeyUsageClientAuth, "collector-1")
		p, err := tls.X509KeyPair(c, k)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	f := func(client *http.Client, wantOK bool) {
		t.Helper()
		resp, err := client.Get(base + "/healthz")
		if wantOK {
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("client with a certificate of the client CA: %v", err)
			}
			resp.Body.Close()
			return
		}
		var certErr *tls.CertificateVerificationError
		if err == nil || errors.As(err, &certErr) {
			t.Fatalf("refused client: err %v, want a handshake alert from the server", err)
		}
	}
	f(httpsClient(roots), false)
	f(httpsClient(roots, pair(otherCA)), false)
	f(httpsClient(roots, pair(clientCA)), true)

	_, _, err = server.NewTLSConfig(server.TLSFiles{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem"), ClientCAFile: filepath.Join(dir, "key.pem")}, nil)
	if err == nil || err.Error() != "--tls-client-ca-file: "+filepath.Join(dir, "key.pem")+" holds no PEM certificate" {
		t.Fatalf("a key as client CA file: %v", err)
	}
}
