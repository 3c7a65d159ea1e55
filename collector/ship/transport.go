package ship

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
)

// TransportConfig holds the credentials and trust of a client of a Peakline
// server: the --token-file, --ca-file, --cert-file and --key-file flags of
// collect, import --server and query --server. The zero value sends no
// token, trusts the system roots and presents no client certificate.
type TransportConfig struct {
	// TokenFile holds the bearer token sent as "Authorization: Bearer …"
	// (--token-file). It is read once, when the Transport is made.
	TokenFile string
	// CAFile is a PEM bundle of CA certificates trusted for the server's
	// certificate in addition to the system roots (--ca-file): a private
	// CA is added, a server with a public certificate keeps working.
	CAFile string
	// CertFile and KeyFile are the PEM client certificate and its key for
	// mutual TLS (--cert-file, --key-file); give both or neither.
	CertFile, KeyFile string
}

// Transport is the http.RoundTripper of a client of one Peakline server:
// TLS with the configured trust and client certificate, and the bearer
// token added to requests to that server only (never to another host a
// redirect leads to). It remembers the first 401 or 403 answer (Refusal).
// It is safe for concurrent use.
type Transport struct {
	base      http.RoundTripper
	origin    string // scheme://host[:port] of the server, lower case
	header    string // "Bearer <token>"; "" sends none
	tokenFile string

	mu      sync.Mutex
	refusal *AuthError
}

// NewTransport reads the token file and the certificates of cfg for a
// client of serverURL. A missing, unreadable or empty token file, a token
// that is not one line of printable characters, a CA file without a
// certificate, or only one of CertFile and KeyFile is an error naming the
// flag and the file. It warns on log, without failing, when the token file
// can be read by group or others, and when a token would go in clear over
// http:// to a host other than loopback. The token itself is never logged
// and never part of an error.
func NewTransport(cfg TransportConfig, serverURL string, log *slog.Logger) (*Transport, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	u, err := url.Parse(serverURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server: must be an http:// or https:// URL, got %q", serverURL)
	}
	t := &Transport{origin: strings.ToLower(u.Scheme + "://" + u.Host), tokenFile: cfg.TokenFile}
	if cfg.TokenFile != "" {
		token, err := ReadTokenFile("--token-file", cfg.TokenFile, log)
		if err != nil {
			return nil, err
		}
		t.header = "Bearer " + token
		if u.Scheme == "http" && !IsLoopback(u.Hostname()) {
			log.Warn("the token goes in clear over http to a host that is not loopback; use an https:// --server",
				"server", serverURL, "token_file", cfg.TokenFile)
		}
	}
	tlsConf, err := clientTLSConfig(cfg)
	if err != nil {
		return nil, err
	}
	if u.Scheme == "http" && (cfg.CAFile != "" || cfg.CertFile != "") {
		log.Warn("--ca-file, --cert-file and --key-file are unused with an http:// --server", "server", serverURL)
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.TLSClientConfig = tlsConf
	t.base = base
	return t, nil
}

// ReadTokenFile reads the bearer token file that flag names: one line,
// surrounding whitespace trimmed. An unreadable or empty file, or one
// holding more than the token, is an error naming flag and the file; a
// file readable by others, or by a group other than the root-owned,
// service-group-readable layout of the packages (root:peakline 0640, which
// the reader cannot rewrite), is only warned about on log. The token
// is never part of an error or a log line. Every client of a server or of
// AWX reads its token with it.
func ReadTokenFile(flag, file string, log *slog.Logger) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s: cannot read token file: %w", flag, err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("%s: %s is empty; it must hold the token", flag, file)
	}
	for _, c := range token {
		// RFC 6750 b64token characters are a subset of these; a space or a
		// second line means the file is not a bare token.
		if c <= ' ' || c > '~' {
			return "", fmt.Errorf("%s: %s must hold the token alone, one line without spaces or control characters", flag, file)
		}
	}
	if fi, err := os.Stat(file); err == nil && tooOpen(fi) {
		log.Warn("the "+flag+" file can be read by group or others; chmod 600 it", "token_file", file, "mode", fi.Mode().Perm().String())
	}
	return token, nil
}

// tooOpen tells whether a token file can be read by more than its reader:
// any mode bit for others, or group bits unless the file belongs to another
// user and to the reader's own group.
func tooOpen(fi os.FileInfo) bool {
	perm := fi.Mode().Perm()
	if perm&0o007 != 0 {
		return true
	}
	if perm&0o070 == 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || int(st.Uid) == os.Geteuid() || int(st.Gid) != os.Getegid()
}

// CertPool returns the system roots plus the certificates of the PEM CA
// bundle that flag names. A file that cannot be read or holds no
// certificate is an error naming flag and the file.
func CertPool(flag, file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot read CA bundle: %w", flag, err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: %s holds no PEM certificate", flag, file)
	}
	return pool, nil
}

// clientTLSConfig makes the TLS settings of cfg; nil when cfg has none.
func clientTLSConfig(cfg TransportConfig) (*tls.Config, error) {
	if (cfg.CertFile == "") != (cfg.KeyFile == "") {
		return nil, errors.New("--cert-file and --key-file: mutual TLS needs both, the client certificate and its key")
	}
	if cfg.CAFile == "" && cfg.CertFile == "" {
		return nil, nil
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.CAFile != "" {
		pool, err := CertPool("--ca-file", cfg.CAFile)
		if err != nil {
			return nil, err
		}
		conf.RootCAs = pool
	}
	if cfg.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("--cert-file %s and --key-file %s: cannot load the client certificate: %w", cfg.CertFile, cfg.KeyFile, err)
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	return conf, nil
}

// IsLoopback tells whether host (no port) is this machine: a token sent
// to it over http:// does not cross the network.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// RoundTrip sends r, with the token when r goes to the server. It does
// not modify r. It remembers the first 401 or 403 answer, whose body it
// reads and puts back for the caller.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	toServer := strings.ToLower(r.URL.Scheme+"://"+r.URL.Host) == t.origin
	if toServer && t.header != "" && r.Header.Get("Authorization") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", t.header)
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil || !toServer || (resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden) {
		return resp, err
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(data))
	se := readStatusError(&http.Response{StatusCode: resp.StatusCode, Body: io.NopCloser(bytes.NewReader(data))})
	t.mu.Lock()
	if t.refusal == nil {
		t.refusal = newAuthError(se, t.tokenFile)
	}
	t.mu.Unlock()
	return resp, nil
}

// Refusal returns the first 401 or 403 answer of the server, or nil.
func (t *Transport) Refusal() *AuthError {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.refusal
}

// AuthError is a 401 or 403 answer: the server refused the credentials
// (no token, an unknown token, or a token without the scope the request
// needs). Sending again with the same credentials cannot help. It wraps
// the *StatusError.
type AuthError struct {
	Status *StatusError
	// TokenFile is the --token-file the token came from; "" when none was
	// sent.
	TokenFile string
}

func newAuthError(se *StatusError, tokenFile string) *AuthError {
	return &AuthError{Status: se, TokenFile: tokenFile}
}

func (e *AuthError) Error() string {
	answer := fmt.Sprintf("%d %s", e.Status.StatusCode, http.StatusText(e.Status.StatusCode))
	if e.Status.Message != "" {
		answer += ": " + e.Status.Message
	}
	if e.TokenFile == "" {
		return "server refused a request without a token (give one with --token-file): " + answer
	}
	return fmt.Sprintf("server refused the token from --token-file %s: %s", e.TokenFile, answer)
}

func (e *AuthError) Unwrap() error { return e.Status }

// authRefused tells whether err is a 401 or 403 answer and, if so, makes it
// an *AuthError naming tokenFile.
func authRefused(err error, tokenFile string) (*AuthError, bool) {
	var ae *AuthError
	if errors.As(err, &ae) {
		return ae, true
	}
	var se *StatusError
	if errors.As(err, &se) && (se.StatusCode == http.StatusUnauthorized || se.StatusCode == http.StatusForbidden) {
		return newAuthError(se, tokenFile), true
	}
	return nil, false
}

// refused tells whether err is a 401 or 403 answer to a batch and, when
// it is, says once, as an error, that the batches stay spooled for a later
// run. run then stops sending: finish spools what is still in memory, and
// nothing is dropped, unlike other 4xx answers.
func (s *Shipper) refused(err error) bool {
	ae, ok := authRefused(err, s.client.TokenFile)
	if !ok {
		return false
	}
	if s.spool == nil {
		s.log.Error(ae.Error() + "; there is no spool directory, so the batches of this run are lost at exit")
		return true
	}
	s.log.Error(fmt.Sprintf("%v; batches stay spooled in %s and are resent by a later run", ae, s.spool.dir))
	return true
}
