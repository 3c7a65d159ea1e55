package server

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// SecurityConfig is the server's edge policy: credentials, the Host
// names it answers, bounds of client-created state. Zero values take the
// defaults; a nil Auth serves without authentication (main allows that on
// loopback only).
type SecurityConfig struct {
	// Auth checks credentials against scopeRules; nil admits everyone.
	Auth *Authenticator
	// AllowedHosts are the names (without port) a request's Host header
	// may carry; others get 421, against DNS rebinding. Empty answers any
	// Host (embedding and tests); serve always sets it.
	AllowedHosts []string
	// MaxTemplates bounds the job templates with their own collection
	// setting (default 10,000).
	MaxTemplates int
	// MaxPathParamBytes bounds a decoded path parameter, a job or template
	// id (default 256, the store's longest job id).
	MaxPathParamBytes int
	// FailBurst failed authentications per client address are answered
	// before 429; then one per FailInterval (defaults 10 and 2 s).
	FailBurst    int
	FailInterval time.Duration
	// Now is the clock of the rate limit and the login cache; nil is time.Now.
	Now func() time.Time
}

const (
	DefaultMaxTemplates      = 10_000
	defaultMaxPathParamBytes = 256
	defaultFailBurst         = 10
	defaultFailInterval      = 2 * time.Second
	maxLimitedClients        = 10_000
)

func (c *SecurityConfig) setDefaults() {
	if c.MaxTemplates <= 0 {
		c.MaxTemplates = DefaultMaxTemplates
	}
	if c.MaxPathParamBytes <= 0 {
		c.MaxPathParamBytes = defaultMaxPathParamBytes
	}
	if c.FailBurst <= 0 {
		c.FailBurst = defaultFailBurst
	}
	if c.FailInterval <= 0 {
		c.FailInterval = defaultFailInterval
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// security is the state of the edge middlewares.
type security struct {
	now          func() time.Time
	limiter      *failLimiter
	allowedHosts map[string]bool
	authFailures *prometheus.CounterVec
	adminActions *prometheus.CounterVec
}

// useSecurity installs the edge middlewares, outermost first: response
// headers, the Host check, the audit log of admin routes, authentication,
// the cross-site checks, the content types and the path parameters.
func (s *Server) useSecurity(e *echo.Echo, reg prometheus.Registerer) {
	cfg := &s.cfg.Security
	cfg.setDefaults()
	f := promauto.With(reg)
	s.sec = &security{
		now:     cfg.Now,
		limiter: newFailLimiter(cfg.FailInterval, cfg.FailBurst, maxLimitedClients),
		authFailures: f.NewCounterVec(prometheus.CounterOpts{
			Name: "peakline_auth_failures_total",
			Help: "Requests refused by authentication, by reason (missing, malformed, invalid_token, invalid_password, scope, rate_limited).",
		}, []string{"reason"}),
		adminActions: f.NewCounterVec(prometheus.CounterOpts{
			Name: "peakline_admin_actions_total",
			Help: "Requests on admin routes, by action (method and route) and outcome (ok, denied, refused, error).",
		}, []string{"action", "outcome"}),
	}
	if len(cfg.AllowedHosts) > 0 {
		s.sec.allowedHosts = map[string]bool{}
		for _, h := range cfg.AllowedHosts {
			s.sec.allowedHosts[normalizeHost(h)] = true
		}
	}
	rules := scopeRules()
	e.Use(securityHeaders, s.checkHost, s.audit(rules), s.authenticate(rules), checkCrossSite(rules), checkContentType, s.checkPathParams)
}

// apiCSP is the Content-Security-Policy of every answer that is not a
// page (web.go sets the page's): nothing may run or be framed.
const apiCSP = "default-src 'none'; frame-ancestors 'none'"

func securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set(echo.HeaderXContentTypeOptions, "nosniff")
		h.Set(echo.HeaderXFrameOptions, "DENY")
		h.Set(echo.HeaderReferrerPolicy, "same-origin")
		h.Set(echo.HeaderContentSecurityPolicy, apiCSP)
		if c.Request().TLS != nil {
			h.Set(echo.HeaderStrictTransportSecurity, "max-age=31536000")
		}
		return next(c)
	}
}

// normalizeHost lowercases a host name and drops its port, brackets and
// trailing dot.
func normalizeHost(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(h, "."), "["), "]")
	return strings.ToLower(h)
}

// checkHost refuses a Host header the server is not known by: a page of
// another site whose name was re-pointed at this address (DNS rebinding)
// would otherwise read the API as same-origin. /healthz stays open to
// load balancers that ask by IP.
func (s *Server) checkHost(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.sec.allowedHosts == nil || c.Path() == "/healthz" {
			return next(c)
		}
		host := normalizeHost(c.Request().Host)
		if !s.sec.allowedHosts[host] {
			return echo.NewHTTPError(http.StatusMisdirectedRequest,
				fmt.Sprintf("Host %q is not served here: add it to serve --allowed-hosts", host))
		}
		return next(c)
	}
}

func isUnsafeMethod(m string) bool {
	return m != http.MethodGet && m != http.MethodHead && m != http.MethodOptions
}

// checkCrossSite refuses a state-changing request a page of another site
// made the browser send: Sec-Fetch-Site names the relation, Origin the
// page's origin, which must be this host. Clients other than browsers
// send neither Origin nor Sec-Fetch-Site and pass, so curl -X DELETE with
// a token works as it is. PUT and DELETE need no header beyond that: no
// form can send them, and a page of another site can only by asking a
// CORS preflight first, which Peakline never grants (a browser that did
// send one carries Origin and Sec-Fetch-Site). The one write a form can
// send, POST, is held to the route's exact Content-Type
// (checkContentType). Reads sent by POST (the Prometheus query API)
// change nothing and are not checked: without CORS headers a page of
// another site cannot read their answers.
func checkCrossSite(rules []scopeRule) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if !isUnsafeMethod(r.Method) || scopeOf(rules, r.Method, c.Path()) == scopeRead {
				return next(c)
			}
			if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
				return echo.NewHTTPError(http.StatusForbidden,
					fmt.Sprintf("cross-site request refused: Sec-Fetch-Site is %q; %s needs a same-origin request", site, r.Method))
			}
			if origin := r.Header.Get(echo.HeaderOrigin); origin != "" {
				u, err := url.Parse(origin)
				if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
					return echo.NewHTTPError(http.StatusForbidden,
						fmt.Sprintf("cross-site request refused: Origin %q is not this server (%s)", origin, r.Host))
				}
			}
			return next(c)
		}
	}
}

// writeContentType is the exact media type of a write route's body, ""
// for other routes: a browser sends a cross-site POST without asking first
// only as a form or text/plain (or with no type at all), never as these.
func writeContentType(route string) string {
	switch route {
	case "/api/v1/ingest":
		return echo.MIMEApplicationJSON
	case "/api/v1/write", "/prometheus/api/v1/write":
		return "application/x-protobuf"
	}
	return ""
}

// checkContentType refuses a write whose Content-Type is missing or not
// the route's.
func checkContentType(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		want := writeContentType(c.Path())
		if want == "" || c.Request().Method != http.MethodPost {
			return next(c)
		}
		ct := c.Request().Header.Get(echo.HeaderContentType)
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != want {
			return fmt.Errorf("%w: Content-Type must be %s, got %q", errUnsupportedMedia, want, ct)
		}
		return next(c)
	}
}

// checkPathParams bounds the ids of the Peakline API's paths (job and
// template ids) once decoded: at most MaxPathParamBytes of UTF-8 without
// control characters. The Prometheus API checks its own parameters.
func (s *Server) checkPathParams(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		for _, name := range c.ParamNames() {
			if name != "job" && name != "id" {
				continue
			}
			v, err := pathParam(c, name)
			if err != nil {
				return badRequest("%s: the path parameter is not properly escaped: %v", name, err)
			}
			if err := checkID(v, s.cfg.Security.MaxPathParamBytes); err != nil {
				return badRequest("%s: %v", name, err)
			}
		}
		return next(c)
	}
}

// checkID is the rule of client-chosen ids kept by the server.
func checkID(v string, maxBytes int) error {
	switch {
	case v == "":
		return errors.New("must not be empty")
	case len(v) > maxBytes:
		return fmt.Errorf("is %d bytes long, at most %d allowed", len(v), maxBytes)
	case !utf8.ValidString(v):
		return errors.New("must be valid UTF-8")
	case strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return errors.New("must not contain control characters")
	}
	return nil
}

// ErrInsecureListen is returned by CheckListen for a non-loopback address
// without authentication.
var ErrInsecureListen = errors.New("refusing to serve without authentication on a non-loopback address")

// CheckListen decides whether serve may listen on addr (host:port): a
// loopback address always; any other only with authentication or the
// explicit insecure opt-out. A host name counts as loopback when every
// address it resolves to is.
func CheckListen(ctx context.Context, addr string, withAuth, insecureNoAuth bool, resolver *net.Resolver) error {
	if withAuth || insecureNoAuth {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	loopback, err := isLoopbackHost(ctx, host, resolver)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	if !loopback {
		return fmt.Errorf("--listen %s: %w: give --auth-file FILE (scoped tokens), or --insecure-no-auth to serve anyone who can connect", addr, ErrInsecureListen)
	}
	return nil
}

func isLoopbackHost(ctx context.Context, host string, resolver *net.Resolver) (bool, error) {
	if host == "" {
		return false, nil // every interface
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback(), nil
	}
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	addrs, err := resolver.LookupIPAddr(ctx, host)
	if err != nil {
		return false, fmt.Errorf("resolve %q: %w", host, err)
	}
	for _, a := range addrs {
		if !a.IP.IsLoopback() {
			return false, nil
		}
	}
	return len(addrs) > 0, nil
}

// DefaultAllowedHosts are the Host names served when --allowed-hosts is
// not given: the listen host, the loopback names, the certificate's names
// and, when listening on every interface, this machine's name and
// addresses.
func DefaultAllowedHosts(listenHost string, certNames []string) []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	ip := net.ParseIP(listenHost)
	if listenHost == "" || ip != nil && ip.IsUnspecified() {
		if name, err := os.Hostname(); err == nil {
			hosts = append(hosts, name)
		}
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok {
					hosts = append(hosts, n.IP.String())
				}
			}
		}
	} else {
		hosts = append(hosts, listenHost)
	}
	hosts = append(hosts, certNames...)
	for i, h := range hosts {
		hosts[i] = normalizeHost(h)
	}
	slices.Sort(hosts)
	return slices.Compact(hosts)
}
