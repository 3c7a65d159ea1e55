package main

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/peakline/peakline/server"
)

// serveSecurity holds serve's security flags: authentication, TLS, the
// allowed Host names and the bounds of client-created state.
type serveSecurity struct {
	authFile       string
	insecureNoAuth bool
	tls            server.TLSFiles
	allowedHosts   []string
	authPoll       time.Duration
}

func (s *serveSecurity) flags(f *pflag.FlagSet, cfg *server.SecurityConfig) {
	f.StringVar(&s.authFile, "auth-file", "", "YAML file of tokens and users with scopes (read, ingest, admin); reloaded on change and on SIGHUP")
	f.BoolVar(&s.insecureNoAuth, "insecure-no-auth", false, "serve a non-loopback --listen without authentication (anyone who can connect may read, write and delete)")
	f.StringVar(&s.tls.CertFile, "tls-cert-file", "", "PEM certificate chain: serve HTTPS (reloaded when it changes)")
	f.StringVar(&s.tls.KeyFile, "tls-key-file", "", "PEM private key of --tls-cert-file")
	f.StringVar(&s.tls.ClientCAFile, "tls-client-ca-file", "", "PEM CA certificates: require client certificates signed by them (mutual TLS)")
	f.StringSliceVar(&s.allowedHosts, "allowed-hosts", nil, `Host header names served ("*" for any; default: the --listen host, localhost, 127.0.0.1, ::1 and the certificate's names; every local name and address when listening on all interfaces)`)
	f.DurationVar(&s.authPoll, "auth-file-poll", 3*time.Second, "how often --auth-file is checked for changes")
	f.IntVar(&cfg.MaxTemplates, "max-templates", 10_000, "most job templates with their own collection setting")
}

// apply checks the flags, fills cfg and starts the auth file's reloads;
// the returned function wraps the listener in TLS when asked and names
// the URL scheme.
func (s *serveSecurity) apply(cmd *cobra.Command, listen string, cfg *server.SecurityConfig, logger *slog.Logger) (func(net.Listener) (net.Listener, string), error) {
	ctx := cmd.Context()
	if err := server.CheckListen(ctx, listen, s.authFile != "", s.insecureNoAuth, nil); err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(listen)
	if s.authFile == "" && s.insecureNoAuth {
		logger.Warn("serving without authentication: anyone who can connect may read, write and delete (--insecure-no-auth)", "listen", listen)
	}
	if s.authFile != "" {
		auth, err := server.NewAuthenticator(s.authFile, logger)
		if err != nil {
			return nil, fmt.Errorf("--auth-file: %w", err)
		}
		cfg.Auth = auth
		go auth.Watch(ctx, s.authPoll)
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
	if s.tls.CertFile != "" || s.tls.KeyFile != "" || s.tls.ClientCAFile != "" {
		var err error
		if tlsCfg, certNames, err = server.NewTLSConfig(s.tls, logger); err != nil {
			return nil, err
		}
	}
	cfg.AllowedHosts = s.allowedHosts
	if slices.Contains(s.allowedHosts, "*") {
		cfg.AllowedHosts = nil // any Host: a proxy in front checks it
	} else if len(cfg.AllowedHosts) == 0 {
		cfg.AllowedHosts = server.DefaultAllowedHosts(host, certNames)
	}
	return func(ln net.Listener) (net.Listener, string) {
		if tlsCfg == nil {
			return ln, "http"
		}
		return tls.NewListener(ln, tlsCfg), "https"
	}, nil
}
