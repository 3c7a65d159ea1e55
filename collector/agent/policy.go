package agent

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/peakline/peakline/collector/live"
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
// policyTTL. Failures are not cached: the next job asks again. It is safe
// for concurrent use.
type policyCache struct {
	ask func(ctx context.Context, template string) (live.Policy, error)
	now func() time.Time
	log *slog.Logger

	mu      sync.Mutex
	entries map[string]policyEntry // template id → answer
	failing bool                   // the last ask failed, and it was logged
}

type policyEntry struct {
	p  live.Policy
	at time.Time
}

func newPolicyCache(ask func(ctx context.Context, template string) (live.Policy, error), log *slog.Logger) *policyCache {
	return &policyCache{ask: ask, now: time.Now, log: log, entries: map[string]policyEntry{}}
}

// decide tells whether a job of template (a template id, "" when AWX
// names none) is collected, and why. When the server cannot be asked it
// collects: losing data is worse than storing it unasked; that is logged
// once until the server answers again, and each job's part at debug.
func (c *policyCache) decide(ctx context.Context, template string, log *slog.Logger) (collect bool, reason string) {
	c.mu.Lock()
	e, ok := c.entries[template]
	c.mu.Unlock()
	if ok && c.now().Sub(e.at) < policyTTL {
		return e.p.Decide()
	}
	p, err := c.ask(ctx, template)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if !c.failing {
			c.failing = true
			c.log.Warn("cannot ask the server whether to collect; collecting every job until it answers", "err", err)
		}
		log.Debug("cannot ask the server whether to collect the job; collecting it", "template", template, "err", err)
		return true, "the server cannot be asked"
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
