package agent

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/peakline/peakline/collector/live"
	"golang.org/x/sync/singleflight"
)

// Bounds of the policy cache: how long the server's answer for one
// template is reused, so that the jobs of one template do not each ask,
// and how many templates are remembered.
const (
	policyTTL        = 30 * time.Second
	maxPolicyEntries = 1024
)

// policyCache asks the server's collection policy (live.FetchPolicy, as
// `peakline collect` does) for a job's template, reusing an answer for
// policyTTL. Jobs that ask about one template at once (an agent started
// among running jobs) share one request. Failures are not cached: the
// next job asks again. It is safe for concurrent use.
type policyCache struct {
	ask func(ctx context.Context, template string) (live.Policy, error)
	// fallback is Config.PolicyFallback: what a job is when the policy
	// cannot be read.
	fallback string
	now      func() time.Time
	log      *slog.Logger

	asking singleflight.Group // template id → the request in flight

	mu      sync.Mutex
	entries map[string]policyEntry // template id → answer
	failing bool                   // the last ask failed, and it was logged
}

type policyEntry struct {
	p  live.Policy
	at time.Time
}

func newPolicyCache(ask func(ctx context.Context, template string) (live.Policy, error), fallback string, log *slog.Logger) *policyCache {
	return &policyCache{ask: ask, fallback: fallback, now: time.Now, log: log, entries: map[string]policyEntry{}}
}

// decide tells whether a job of template (a template id, "" when AWX
// names none) is collected, and why. When the server cannot be asked
// (down, or refusing the token) the fallback decides: that is logged as
// an error once until the server answers again, and each job's part as
// a warning.
func (c *policyCache) decide(ctx context.Context, template string, log *slog.Logger) (collect bool, reason string) {
	c.mu.Lock()
	e, ok := c.entries[template]
	c.mu.Unlock()
	if ok && c.now().Sub(e.at) < policyTTL {
		return e.p.Decide()
	}
	v, err, _ := c.asking.Do(template, func() (any, error) { return c.ask(ctx, template) })
	p, _ := v.(live.Policy)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		collect := c.fallback != PolicyDrop
		what := "collecting"
		if !collect {
			what = "dropping"
		}
		if !c.failing {
			c.failing = true
			args := []any{"policy_fallback", c.fallback, "err", err}
			if strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), "403") {
				args = append(args, "hint", "the server refuses the token for GET /api/v1/settings: give the agent a token with the ingest scope (a server older than this agent lets only read tokens see the policy)")
			}
			c.log.Error("cannot read the server's collection policy: "+what+" every job as --policy-fallback says, whatever the templates' settings, until it answers", args...)
		}
		log.Warn("collection policy unknown; "+what+" the job as --policy-fallback says", "template", template, "policy_fallback", c.fallback)
		return collect, "the server's collection policy cannot be read (--policy-fallback " + c.fallback + ")"
	}
	if c.failing {
		c.failing = false
		c.log.Info("the server answers whether to collect again")
	}
	if len(c.entries) >= maxPolicyEntries {
		now := c.now()
		for k, old := range c.entries {
			if now.Sub(old.at) >= policyTTL {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= maxPolicyEntries {
			clear(c.entries)
		}
	}
	c.entries[template] = policyEntry{p: p, at: c.now()}
	return p.Decide()
}
