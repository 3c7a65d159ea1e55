package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"
)

// DefaultAuthPoll is how often Edge.AuthFile is checked for changes when
// Edge.AuthPoll is 0.
const DefaultAuthPoll = 3 * time.Second

// Edge is what serve is told about its edge: authentication, TLS and the
// Host names it answers (serve's --auth-file, --tls-*, --allowed-hosts).
type Edge struct {
	// AuthFile is the YAML file of tokens and users; "" serves without
	// authentication, which a non-loopback listen address refuses unless
	// InsecureNoAuth.
	AuthFile       string
	InsecureNoAuth bool
	// AuthPoll is how often AuthFile is checked for changes; it is also
	// reloaded on SIGHUP. 0 means DefaultAuthPoll.
	AuthPoll time.Duration
	TLS      TLSFiles
	// AllowedHosts are the Host names served; "*" any, none the defaults
	// (DefaultAllowedHosts).
	AllowedHosts []string
}

// Apply checks e against the listen address and fills cfg's
// authentication and allowed hosts, starting the auth file's reloads
// (on change and on SIGHUP) until ctx ends. The returned function wraps
// the listener in TLS when asked for and names the URL scheme. Nothing is
// listened on: a refusal to start touches nothing.
func (e Edge) Apply(ctx context.Context, listen string, cfg *SecurityConfig, logger *slog.Logger) (func(net.Listener) (net.Listener, string), error) {
	if err := CheckListen(ctx, listen, e.AuthFile != "", e.InsecureNoAuth, nil); err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(listen)
	if e.AuthFile == "" && e.InsecureNoAuth {
		logger.Warn("serving without authentication: anyone who can connect may read, write and delete (--insecure-no-auth)", "listen", listen)
	}
	if e.AuthFile != "" {
		auth, err := NewAuthenticator(e.AuthFile, logger)
		if err != nil {
			return nil, fmt.Errorf("--auth-file: %w", err)
		}
		cfg.Auth = auth
		poll := e.AuthPoll
		if poll <= 0 {
			poll = DefaultAuthPoll
		}
		go auth.Watch(ctx, poll)
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		go func() {
			defer signal.Stop(hup)
			for {
				select {
				case <-ctx.Done():
					return
				case <-hup:
					_ = auth.Reload()
				}
			}
		}()
	}
	var tlsCfg *tls.Config
	var certNames []string
	if e.TLS.CertFile != "" || e.TLS.KeyFile != "" || e.TLS.ClientCAFile != "" {
		var err error
		if tlsCfg, certNames, err = NewTLSConfig(e.TLS, logger); err != nil {
			return nil, err
		}
	}
	cfg.AllowedHosts = e.AllowedHosts
	if slices.Contains(e.AllowedHosts, "*") {
		cfg.AllowedHosts = nil // any Host: a proxy in front checks it
	} else if len(cfg.AllowedHosts) == 0 {
		cfg.AllowedHosts = DefaultAllowedHosts(host, certNames)
	}
	return func(ln net.Listener) (net.Listener, string) {
		if tlsCfg == nil {
			return ln, "http"
		}
		return tls.NewListener(ln, tlsCfg), "https"
	}, nil
}
