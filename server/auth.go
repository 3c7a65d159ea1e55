package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/time/rate"
)

// Authentication: who may call which route. The credentials come from an
// auth file (see AuthFile); every route needs one scope, decided by one
// table (scopeRules). A request without credentials gets 401, one whose
// credentials lack the scope 403 naming it. /healthz stays open.

// scope is a set of permissions; admin implies read and ingest.
type scope uint8

const (
	scopeOpen   scope = 0 // no credentials needed
	scopeRead   scope = 1 << iota
	scopeIngest       // POST ingest and remote write
	scopeAdmin        // deletes and policy changes; implies the others
	scopeAny          // any valid credentials (routes that match nothing: 404/405)
	// scopePolicy is read or ingest: the collection policy (GET settings
	// and a template's setting). A collector must know it before it
	// sends a job's first batch, with the ingest-only token it ships with;
	// an answer to the ingest would come too late, after the samples are
	// stored. The policy names template ids and on/off, nothing a job
	// produced.
	scopePolicy
)

// scopeName maps a scope of the auth file to its bit; 0 for an unknown name.
func scopeName(name string) scope {
	switch name {
	case "read":
		return scopeRead
	case "ingest":
		return scopeIngest
	case "admin":
		return scopeAdmin
	}
	return 0
}

func (s scope) String() string {
	var names []string
	for _, name := range []string{"read", "ingest", "admin"} {
		if s&scopeName(name) != 0 {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}

// allows reports whether credentials holding s may use a route needing need.
func (s scope) allows(need scope) bool {
	switch {
	case need == scopeOpen:
		return true
	case need == scopeAny:
		return s != 0
	case need == scopePolicy:
		return s&(scopeRead|scopeIngest|scopeAdmin) != 0
	case s&scopeAdmin != 0:
		return true
	}
	return s&need == need
}

func parseScopes(names []string) (scope, error) {
	if len(names) == 0 {
		return 0, errors.New("scopes: give at least one of read, ingest, admin")
	}
	var s scope
	for _, name := range names {
		bit := scopeName(name)
		if bit == 0 {
			return 0, fmt.Errorf("scopes: %q is not one of read, ingest, admin", name)
		}
		s |= bit
	}
	return s, nil
}

// scopeRule gives the scope of the routes matching methods (space
// separated) and route (echo's route pattern; a trailing "*" matches any
// route with that prefix). The first matching rule wins.
type scopeRule struct {
	methods string
	route   string
	need    scope
}

// scopeRules is the one route→scope table. A route it does not name needs
// admin: a new mutating endpoint is safe until someone decides otherwise.
func scopeRules() []scopeRule {
	const promAPI = "/prometheus/api/v1"
	rules := []scopeRule{
		{"GET HEAD", "/healthz", scopeOpen},
		{"POST", "/api/v1/ingest", scopeIngest},
		{"POST", "/api/v1/write", scopeIngest},
		{"POST", promAPI + "/write", scopeIngest},
		// The Prometheus query API reads with POST too (long queries as
		// form bodies); only these routes, not a future admin one.
		{"GET HEAD", promAPI + "/*", scopeRead},
		{"GET HEAD", "/api/v1/settings", scopePolicy},
		{"GET HEAD", "/api/v1/templates/:id", scopePolicy},
		{"GET HEAD", "/api/v1/*", scopeRead},
		{"GET HEAD", "/metrics", scopeRead},
		{"GET HEAD", "/", scopeRead},
		{"GET HEAD", "/jobs/:job", scopeRead},
		{"GET HEAD", "/templates/:template", scopeRead},
		{"GET HEAD", "/static/*", scopeRead},
	}
	for _, p := range []string{"/query", "/query_range", "/labels", "/label/:name/values", "/series", "/query_exemplars", "/format_query"} {
		rules = append(rules, scopeRule{"POST", promAPI + p, scopeRead})
	}
	return rules
}

// scopeOf returns the scope a request on route (echo's pattern; "" when no
// route matched) needs.
func scopeOf(rules []scopeRule, method, route string) scope {
	if route == "" {
		return scopeAny
	}
	for _, r := range rules {
		if !slices.Contains(strings.Fields(r.methods), method) {
			continue
		}
		if prefix, ok := strings.CutSuffix(r.route, "*"); ok && strings.HasPrefix(route, prefix) || r.route == route {
			return r.need
		}
	}
	return scopeAdmin
}

// isPageRoute reports whether route is one a browser opens directly; its
// 401 asks for Basic credentials so that the browser prompts.
func isPageRoute(route string) bool {
	return !strings.HasPrefix(route, "/api/") && !strings.HasPrefix(route, "/prometheus/") && route != "/metrics"
}

// AuthFile is the YAML document of serve --auth-file.
//
//	tokens:
//	  - {name: grafana, sha256: "<hex sha256 of the token>", scopes: [read]}
//	  - {name: collector, token: "<the token itself>", scopes: [ingest]}
//	users:
//	  - {name: alice, bcrypt: "$2y$10$...", scopes: [admin]}
type AuthFile struct {
	Tokens []struct {
		Name   string   `yaml:"name"`
		SHA256 string   `yaml:"sha256"`
		Token  string   `yaml:"token"`
		Scopes []string `yaml:"scopes"`
	} `yaml:"tokens"`
	Users []struct {
		Name   string   `yaml:"name"`
		Bcrypt string   `yaml:"bcrypt"`
		Scopes []string `yaml:"scopes"`
	} `yaml:"users"`
}

// minTokenLen is the shortest plain token accepted: a guessable token is
// worse than none, since it looks safe.
const minTokenLen = 16

type tokenEntry struct {
	name   string
	sum    [sha256.Size]byte
	scopes scope
}

type userEntry struct {
	hash   []byte
	scopes scope
}

// credentials are one version of the auth file. The bcrypt cache lives
// here so that a reload forgets every cached password.
type credentials struct {
	tokens []tokenEntry
	users  map[string]userEntry
	// dummyHash is compared when the user is unknown, so that an unknown
	// user costs as much time as a wrong password.
	dummyHash []byte

	mu    sync.Mutex
	cache map[[sha256.Size]byte]cachedLogin // key: sha256(user ":" password)
}

type cachedLogin struct {
	user    string
	expires time.Time
}

const (
	loginCacheTTL  = time.Minute
	loginCacheSize = 1024
)

// parseAuthFile reads and checks an auth file's content.
func parseAuthFile(b []byte) (*credentials, error) {
	var f AuthFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("parse YAML: %w", err)
	}
	if len(f.Tokens) == 0 && len(f.Users) == 0 {
		return nil, errors.New("no tokens and no users: every request would be refused")
	}
	c := &credentials{users: map[string]userEntry{}, cache: map[[sha256.Size]byte]cachedLogin{}}
	seen := map[string]bool{}
	for i, t := range f.Tokens {
		where := fmt.Sprintf("tokens[%d]", i)
		if t.Name == "" {
			return nil, fmt.Errorf("%s: name: is required (it is logged instead of the token)", where)
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("%s: name: %q is used twice", where, t.Name)
		}
		seen[t.Name] = true
		e := tokenEntry{name: t.Name}
		switch {
		case (t.SHA256 == "") == (t.Token == ""):
			return nil, fmt.Errorf("%s (%s): give exactly one of sha256 and token", where, t.Name)
		case t.Token != "":
			if strings.TrimSpace(t.Token) == "" {
				return nil, fmt.Errorf("%s (%s): token: is blank; give a real token (e.g. openssl rand -hex 32)", where, t.Name)
			}
			if strings.TrimSpace(t.Token) != t.Token {
				return nil, fmt.Errorf("%s (%s): token: must not begin or end with white space (a request's token is read without it)", where, t.Name)
			}
			if len(t.Token) < minTokenLen {
				return nil, fmt.Errorf("%s (%s): token: must be at least %d characters (e.g. openssl rand -hex 32)", where, t.Name, minTokenLen)
			}
			e.sum = sha256.Sum256([]byte(t.Token))
		default:
			sum, err := hex.DecodeString(t.SHA256)
			if err != nil || len(sum) != sha256.Size {
				return nil, fmt.Errorf("%s (%s): sha256: must be 64 hex digits (printf %%s TOKEN | sha256sum)", where, t.Name)
			}
			copy(e.sum[:], sum)
			if isBlankSum(e.sum) {
				return nil, fmt.Errorf("%s (%s): sha256: is the hash of an empty token (the token file was empty?); give the hash of the real token", where, t.Name)
			}
		}
		var err error
		if e.scopes, err = parseScopes(t.Scopes); err != nil {
			return nil, fmt.Errorf("%s (%s): %w", where, t.Name, err)
		}
		c.tokens = append(c.tokens, e)
	}
	for i, u := range f.Users {
		where := fmt.Sprintf("users[%d]", i)
		if u.Name == "" || strings.Contains(u.Name, ":") {
			return nil, fmt.Errorf("%s: name: is required and must not contain ':', got %q", where, u.Name)
		}
		if _, dup := c.users[u.Name]; dup {
			return nil, fmt.Errorf("%s: name: %q is used twice", where, u.Name)
		}
		if _, err := bcrypt.Cost([]byte(u.Bcrypt)); err != nil {
			return nil, fmt.Errorf("%s (%s): bcrypt: is not a bcrypt hash (htpasswd -nbB USER PASSWORD): %w", where, u.Name, err)
		}
		// One bcrypt comparison per user at load: an empty password
		// would let anyone in who sends the user name.
		if bcrypt.CompareHashAndPassword([]byte(u.Bcrypt), nil) == nil {
			return nil, fmt.Errorf("%s (%s): bcrypt: is the hash of the empty password; hash a real one (htpasswd -nbB USER PASSWORD)", where, u.Name)
		}
		s, err := parseScopes(u.Scopes)
		if err != nil {
			return nil, fmt.Errorf("%s (%s): %w", where, u.Name, err)
		}
		c.users[u.Name] = userEntry{hash: []byte(u.Bcrypt), scopes: s}
	}
	if len(f.Users) > 0 {
		// An unknown user is checked against a hash of the users' highest
		// cost, so that the time taken does not tell which names exist.
		cost := bcrypt.MinCost
		for _, u := range c.users {
			if uc, err := bcrypt.Cost(u.hash); err == nil {
				cost = max(cost, uc)
			}
		}
		var err error
		if c.dummyHash, err = bcrypt.GenerateFromPassword([]byte("unknown user"), cost); err != nil {
			return nil, fmt.Errorf("make the unknown-user hash: %w", err)
		}
	}
	return c, nil
}

// blankSums are the SHA-256 sums of the tokens an empty token file
// yields: nothing, or a line end (sha256sum < FILE, echo "" | sha256sum).
var blankSums = [...][sha256.Size]byte{sha256.Sum256(nil), sha256.Sum256([]byte("\n")), sha256.Sum256([]byte("\r\n"))}

func isBlankSum(sum [sha256.Size]byte) bool {
	for _, b := range blankSums {
		if sum == b {
			return true
		}
	}
	return false
}

// principal is who made a request.
type principal struct {
	name   string
	scopes scope
}

// Reasons of failed authentication, the label of peakline_auth_failures_total.
const (
	failMissing     = "missing"
	failMalformed   = "malformed"
	failBadToken    = "invalid_token"
	failBadPassword = "invalid_password"
	failScope       = "scope"
	failRateLimited = "rate_limited"
)

// authenticate finds the principal of r's Authorization header, or why not.
func (c *credentials) authenticate(r *http.Request, now time.Time) (principal, string) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return principal{}, failMissing
	}
	kind, rest, _ := strings.Cut(h, " ")
	switch strings.ToLower(kind) {
	case "bearer":
		tok := strings.TrimSpace(rest)
		if tok == "" {
			return principal{}, failMalformed // never compared: no entry may be empty
		}
		sum := sha256.Sum256([]byte(tok))
		// Compare with every entry, whatever matched, so the time taken
		// says nothing about which token was close.
		found := -1
		for i := range c.tokens {
			if subtle.ConstantTimeCompare(sum[:], c.tokens[i].sum[:]) == 1 {
				found = i
			}
		}
		if found < 0 {
			return principal{}, failBadToken
		}
		return principal{name: c.tokens[found].name, scopes: c.tokens[found].scopes}, ""
	case "basic":
		user, pass, ok := r.BasicAuth()
		if !ok || user == "" || pass == "" {
			return principal{}, failMalformed
		}
		return c.login(user, pass, now)
	}
	return principal{}, failMalformed
}

// login checks a user's password; a success is remembered for
// loginCacheTTL, since bcrypt's cost is paid on every request otherwise
// (a page load is a dozen requests).
func (c *credentials) login(user, pass string, now time.Time) (principal, string) {
	key := sha256.Sum256([]byte(user + ":" + pass))
	u, known := c.users[user]
	c.mu.Lock()
	hit, ok := c.cache[key]
	c.mu.Unlock()
	if ok && known && hit.user == user && now.Before(hit.expires) {
		return principal{name: user, scopes: u.scopes}, ""
	}
	hash := u.hash
	if !known {
		hash = c.dummyHash
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(pass)) != nil || !known {
		return principal{}, failBadPassword
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.cache) >= loginCacheSize {
		for k, v := range c.cache {
			if !now.Before(v.expires) || len(c.cache) >= loginCacheSize {
				delete(c.cache, k)
			}
		}
	}
	c.cache[key] = cachedLogin{user: user, expires: now.Add(loginCacheTTL)}
	return principal{name: user, scopes: u.scopes}, ""
}

// Authenticator holds the credentials of an auth file and reloads them
// when the file changes; a file that does not load keeps the previous
// credentials (and the reason is logged). It is safe for concurrent use.
type Authenticator struct {
	path   string
	logger *slog.Logger

	reloadMu sync.Mutex // one reload at a time; guards reads of creds and sig in reload
	mu       sync.RWMutex
	creds    *credentials
	sig      fileSig
	failed   fileSig // the last version that did not load (modTime and size), for Watch not to log it again
}

// fileSig tells whether a file changed since it was last read.
type fileSig struct {
	modTime time.Time
	size    int64
	sum     [sha256.Size]byte
}

// NewAuthenticator loads the auth file at path; a bad file is an error
// here (at start), and only logged on later reloads.
func NewAuthenticator(path string, logger *slog.Logger) (*Authenticator, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	a := &Authenticator{path: path, logger: logger}
	if _, err := a.reload(false, true); err != nil {
		return nil, err
	}
	return a, nil
}

// Reload reads the file again (on SIGHUP): whatever its time and size
// say, its content decides. On error the previous credentials stay in
// force; the error says why.
func (a *Authenticator) Reload() error {
	return a.reloadAndLog(false, true)
}

// reloadAndLog reads the file if it changed (or, with force, always);
// quiet skips a broken version already logged.
func (a *Authenticator) reloadAndLog(quiet, force bool) error {
	changed, err := a.reload(quiet, force)
	if err != nil {
		a.logger.Error("auth file not reloaded, keeping the previous one", "path", a.path, "err", err)
		return err
	}
	if changed {
		a.logger.Info("auth file reloaded", "path", a.path)
	}
	return nil
}

func (a *Authenticator) reload(skipFailed, force bool) (bool, error) {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	st, err := os.Stat(a.path)
	if err != nil {
		return false, fmt.Errorf("read auth file: %w", err)
	}
	if !force && skipFailed && st.ModTime().Equal(a.failed.modTime) && st.Size() == a.failed.size {
		return false, nil
	}
	old := a.sig
	if !force && a.creds != nil && st.ModTime().Equal(old.modTime) && st.Size() == old.size {
		return false, nil
	}
	b, err := os.ReadFile(a.path)
	if err != nil {
		return false, fmt.Errorf("read auth file: %w", err)
	}
	sig := fileSig{modTime: st.ModTime(), size: st.Size(), sum: sha256.Sum256(b)}
	if a.creds != nil && sig.sum == old.sum {
		a.mu.Lock()
		a.sig = sig
		a.mu.Unlock()
		return false, nil
	}
	creds, err := parseAuthFile(b)
	if err != nil {
		a.failed = fileSig{modTime: st.ModTime(), size: st.Size()}
		return false, fmt.Errorf("auth file %s: %w", a.path, err)
	}
	a.mu.Lock()
	a.creds, a.sig = creds, sig
	a.mu.Unlock()
	return true, nil
}

// Watch reloads the file every interval until ctx is done (editors
// replace files, so a poll of mtime, size and content is surer than
// inotify on the path).
func (a *Authenticator) Watch(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = a.reloadAndLog(true, false)
		}
	}
}

func (a *Authenticator) current() *credentials {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.creds
}

// failLimiter slows down guessing: each client address may fail
// authentication burst times, then once per interval. It holds at most
// maxClients addresses; addresses whose budget is full again go first.
type failLimiter struct {
	every      rate.Limit
	burst      int
	maxClients int

	mu      sync.Mutex
	clients map[string]*rate.Limiter
}

func newFailLimiter(every time.Duration, burst, maxClients int) *failLimiter {
	return &failLimiter{every: rate.Every(every), burst: burst, maxClients: maxClients, clients: map[string]*rate.Limiter{}}
}

// wait returns how long addr must wait before its next attempt; 0 for none.
func (l *failLimiter) wait(addr string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.clients[addr]
	if !ok || lim.TokensAt(now) >= 1 {
		return 0
	}
	missing := 1 - lim.TokensAt(now)
	return time.Duration(math.Ceil(missing / float64(l.every) * float64(time.Second)))
}

// fail takes one attempt from addr's budget.
func (l *failLimiter) fail(addr string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.clients[addr]
	if !ok {
		if len(l.clients) >= l.maxClients {
			l.evict(now)
		}
		lim = rate.NewLimiter(l.every, l.burst)
		l.clients[addr] = lim
	}
	lim.AllowN(now, 1)
}

// evict drops the addresses back at a full budget, else any one.
func (l *failLimiter) evict(now time.Time) {
	for addr, lim := range l.clients {
		if lim.TokensAt(now) >= float64(l.burst) {
			delete(l.clients, addr)
		}
	}
	for addr := range l.clients {
		if len(l.clients) < l.maxClients {
			break
		}
		delete(l.clients, addr)
	}
}

// clientAddr is the peer's IP. Forwarded headers are not trusted: a
// client could name any address there and escape the limit.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

const principalKey = "peakline.principal"

// whoOf is the name of the request's principal for logs: "anonymous"
// without auth, "unauthenticated" when credentials were missing or wrong.
func whoOf(c echo.Context) string {
	if p, ok := c.Get(principalKey).(principal); ok {
		return p.name
	}
	return "unauthenticated"
}

// authenticate is the middleware applying scopeRules.
func (s *Server) authenticate(rules []scopeRule) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			need := scopeOf(rules, r.Method, c.Path())
			if s.cfg.Security.Auth == nil {
				c.Set(principalKey, principal{name: "anonymous", scopes: scopeAdmin})
				return next(c)
			}
			if need == scopeOpen {
				return next(c)
			}
			now := s.sec.now()
			addr := clientAddr(r)
			// Failures are counted per address, and for Basic per address
			// and user name: a client guessing one password locks out only
			// that name from that address. A valid token is always let
			// through, so that failures from a shared address (a proxy, a
			// NAT) cannot lock out the collectors and Grafana behind it;
			// a password, which can be guessed, is not even checked while
			// its name is locked.
			key := addr
			user, _, basic := r.BasicAuth()
			if basic {
				key = addr + " user " + user
			}
			refuseLimited := func(wait time.Duration) error {
				s.sec.authFailures.WithLabelValues(failRateLimited).Inc()
				secs := max(1, int(math.Ceil(wait.Seconds())))
				c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
				return echo.NewHTTPError(http.StatusTooManyRequests,
					fmt.Sprintf("too many failed authentication attempts from %s: retry in %d s", addr, secs))
			}
			wait := s.sec.limiter.wait(key, now)
			if basic && wait > 0 {
				return refuseLimited(wait)
			}
			p, reason := s.cfg.Security.Auth.current().authenticate(r, now)
			if reason != "" {
				if wait > 0 {
					return refuseLimited(wait)
				}
				s.sec.authFailures.WithLabelValues(reason).Inc()
				if reason != failMissing {
					s.sec.limiter.fail(key, now)
				}
				if isPageRoute(c.Path()) {
					c.Response().Header().Set("WWW-Authenticate", `Basic realm="peakline", charset="UTF-8"`)
				} else {
					c.Response().Header().Set("WWW-Authenticate", `Bearer realm="peakline"`)
				}
				msg := "authentication required: send Authorization: Bearer <token> (or Basic user:password)"
				if reason != failMissing {
					msg = "authentication failed: the token or the user and password are not valid"
				}
				return echo.NewHTTPError(http.StatusUnauthorized, msg)
			}
			c.Set(principalKey, p)
			if !p.scopes.allows(need) {
				s.sec.authFailures.WithLabelValues(failScope).Inc()
				want := need.String()
				switch need {
				case scopeAny:
					want = "any"
				case scopePolicy:
					want = "read or ingest"
				}
				return echo.NewHTTPError(http.StatusForbidden,
					fmt.Sprintf("forbidden: %s %s needs the %q scope; %q has %s", r.Method, c.Path(), want, p.name, p.scopes))
			}
			return next(c)
		}
	}
}

// Route is one registered route: its method and echo path pattern.
type Route struct{ Method, Path string }

// Routes lists every route the server answers, for tests that must cover
// them all (a new route cannot be forgotten in the scope table's tests).
func (s *Server) Routes() []Route {
	var out []Route
	for _, r := range s.echo.Routes() {
		out = append(out, Route{Method: r.Method, Path: r.Path})
	}
	slices.SortFunc(out, func(a, b Route) int { return strings.Compare(a.Method+" "+a.Path, b.Method+" "+b.Path) })
	return out
}
