package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// TLS is written on crypto/tls rather than taken from
// github.com/prometheus/exporter-toolkit/web: the toolkit owns the
// listener and the http.Server, and brings its own web-config file whose
// basic_auth_users know no scopes; Peakline needs scoped tokens, its own
// graceful shutdown, and certificates that reload in place.

// TLSFiles names the PEM files of serve's TLS.
type TLSFiles struct {
	CertFile string // certificate chain, leaf first
	KeyFile  string
	// ClientCAFile, when set, requires every client to present a
	// certificate signed by one of its CAs (mutual TLS).
	ClientCAFile string
}

// NewTLSConfig builds the server's TLS settings: TLS 1.2 at least, the
// key pair re-read whenever either file changes (checked on each
// handshake by modification time and size; a pair that does not load
// keeps the previous one and is logged), and client certificates required
// when a client CA is given. It returns the names of the certificate too
// (DNS names and IP addresses), which the Host check accepts.
func NewTLSConfig(files TLSFiles, logger *slog.Logger) (*tls.Config, []string, error) {
	if files.CertFile == "" || files.KeyFile == "" {
		return nil, nil, errors.New("--tls-cert-file and --tls-key-file: give both")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cr := &certReloader{certFile: files.CertFile, keyFile: files.KeyFile, logger: logger}
	if err := cr.load(); err != nil {
		return nil, nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: cr.get}
	if files.ClientCAFile != "" {
		pem, err := os.ReadFile(files.ClientCAFile)
		if err != nil {
			return nil, nil, fmt.Errorf("--tls-client-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("--tls-client-ca-file: %s holds no PEM certificate", files.ClientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	leaf := cr.cert.Leaf
	names := append([]string(nil), leaf.DNSNames...)
	for _, ip := range leaf.IPAddresses {
		names = append(names, ip.String())
	}
	return cfg, names, nil
}

type fileStamp struct {
	modTime time.Time
	size    int64
}

func stampOf(path string) (fileStamp, error) {
	st, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{st.ModTime(), st.Size()}, nil
}

// certReloader serves the key pair of two files, reloading it when they
// change.
type certReloader struct {
	certFile, keyFile string
	logger            *slog.Logger

	mu         sync.Mutex
	cert       *tls.Certificate
	cStamp     fileStamp
	kStamp     fileStamp
	failedOnce bool // the current stamps failed to load: log once, not per handshake
}

// load reads the pair; the caller holds mu or is the constructor.
func (cr *certReloader) load() error {
	cs, err := stampOf(cr.certFile)
	if err != nil {
		return fmt.Errorf("--tls-cert-file: %w", err)
	}
	ks, err := stampOf(cr.keyFile)
	if err != nil {
		return fmt.Errorf("--tls-key-file: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(cr.certFile, cr.keyFile)
	if err != nil {
		return fmt.Errorf("--tls-cert-file and --tls-key-file: %w", err)
	}
	cr.cert, cr.cStamp, cr.kStamp = &cert, cs, ks
	return nil
}

func (cr *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	cs, err1 := stampOf(cr.certFile)
	ks, err2 := stampOf(cr.keyFile)
	if err1 == nil && err2 == nil && (cs != cr.cStamp || ks != cr.kStamp) {
		old := cr.cert
		if err := cr.load(); err != nil {
			cr.cert = old
			// A certificate written before its key fails until both are
			// in place; keep serving the old pair meanwhile.
			if !cr.failedOnce {
				cr.logger.Error("tls certificate not reloaded, keeping the previous one", "err", err)
				cr.failedOnce = true
			}
		} else {
			cr.failedOnce = false
			cr.logger.Info("tls certificate reloaded", "cert", cr.certFile)
		}
	}
	return cr.cert, nil
}
