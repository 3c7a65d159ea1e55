package tsdb

import (
	"container/list"
	"sync"
	"sync/atomic"
	"time"
)

// cache keeps job summaries and whole decoded jobs until the job is
// written or deleted. Jobs are evicted least recently used first once
// their samples pass the budget.
//
// Generations are per job, so that a write to one job never keeps
// another from being cached (under live ingest, a global generation let
// no cold job list finish filling). A lookup hands out the current epoch
// as its token; a drop stamps the job with a new epoch; an entry is kept
// only if its job was not stamped after its token, so an entry computed
// before a write of that job is never cached after it.
type cache struct {
	mu        sync.Mutex
	epoch     uint64            // bumped by every drop
	dropped   map[string]uint64 // job -> epoch of its last drop
	floor     uint64            // tokens below it are refused (dropped was forgotten)
	summaries map[string]Summary
	jobs      map[string]*list.Element // of *cachedJob
	lru       list.List                // front: most recently used
	budget    int                      // samples; < 0: no job cache
	held      int

	// decoded counts the jobs read from the TSDB on a miss.
	decoded atomic.Uint64

	// afterMiss, when set (by tests), runs after a lookup missed, before
	// the caller computes the entry.
	afterMiss func(id string)

	spans map[string]Span // of every job listed since it was written (span.go)

	infos map[string]JobInfo // of every job whose template was looked up since it was written (TemplateJobs)
	// ttl, when positive, bounds how long the entries of a job are
	// served: born holds when the first of them was cached since the
	// job was last dropped. A remote store sets it (remote.go).
	ttl  time.Duration
	now  func() time.Time
	born map[string]time.Time
}

// expire drops the entries of job id when they are older than the ttl.
// c.mu is held.
func (c *cache) expire(id string) {
	if c.ttl <= 0 {
		return
	}
	if b, ok := c.born[id]; ok && c.now().Sub(b) >= c.ttl {
		c.forget(id)
	}
}

// forget removes every entry of job id: its decoded job, summary, span
// and info. c.mu is held.
func (c *cache) forget(id string) {
	delete(c.born, id)
	delete(c.summaries, id)
	delete(c.spans, id)
	delete(c.infos, id)
	if e, ok := c.jobs[id]; ok {
		c.remove(e)
	}
}

// stamp records that an entry of job id was cached now, if it is the
// first since the job was dropped or expired. c.mu is held.
func (c *cache) stamp(id string) {
	if c.ttl <= 0 {
		return
	}
	if c.born == nil {
		c.born = map[string]time.Time{}
	}
	if _, ok := c.born[id]; !ok {
		c.born[id] = c.now()
	}
}

// maxDropped bounds the per-job drop stamps kept. Past it they are
// forgotten at once, and fills started before that are not cached.
const maxDropped = 4096

type cachedJob struct {
	id      string
	job     *Job
	samples int
}

func newCache(budget int) *cache {
	if budget == 0 {
		budget = DefaultCacheSamples
	}
	return &cache{summaries: map[string]Summary{}, jobs: map[string]*list.Element{}, dropped: map[string]uint64{}, budget: budget}
}

// summary returns the cached summary of a job, or on a miss the token to
// pass to putSummary.
func (c *cache) summary(id string) (Summary, uint64, bool) {
	c.mu.Lock()
	c.expire(id)
	s, ok := c.summaries[id]
	tok := c.epoch
	c.mu.Unlock()
	if !ok && c.afterMiss != nil {
		c.afterMiss(id)
	}
	return s, tok, ok
}

// fresh reports whether an entry of job id computed from a lookup that
// returned tok may be cached. c.mu is held.
func (c *cache) fresh(id string, tok uint64) bool {
	return tok >= c.floor && c.dropped[id] <= tok
}

func (c *cache) putSummary(id string, s Summary, tok uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fresh(id, tok) {
		c.summaries[id] = s
		c.stamp(id)
	}
}

// job returns the cached job, or on a miss the token to pass to putJob.
func (c *cache) job(id string) (*Job, uint64, bool) {
	c.mu.Lock()
	c.expire(id)
	tok := c.epoch
	if e, ok := c.jobs[id]; ok {
		c.lru.MoveToFront(e)
		c.mu.Unlock()
		return e.Value.(*cachedJob).job, tok, true
	}
	c.mu.Unlock()
	if c.afterMiss != nil {
		c.afterMiss(id)
	}
	return nil, tok, false
}

func (c *cache) putJob(id string, job *Job, tok uint64) {
	n := 0
	for _, col := range job.Columns {
		n += len(col.Ts)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.fresh(id, tok) || n > c.budget {
		return
	}
	if e, ok := c.jobs[id]; ok {
		c.remove(e)
	}
	c.jobs[id] = c.lru.PushFront(&cachedJob{id: id, job: job, samples: n})
	c.stamp(id)
	c.held += n
	for c.held > c.budget {
		c.remove(c.lru.Back())
	}
}

func (c *cache) remove(e *list.Element) {
	cj := c.lru.Remove(e).(*cachedJob)
	delete(c.jobs, cj.id)
	c.held -= cj.samples
}

// drop forgets a job and keeps fills of it that are in flight from
// being cached.
func (c *cache) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	if len(c.dropped) >= maxDropped {
		clear(c.dropped)
		c.floor = c.epoch
	}
	c.dropped[id] = c.epoch
	c.forget(id)
}

// info returns the cached info of a job, or on a miss the token to pass
// to putInfo.
func (c *cache) info(id string) (JobInfo, uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire(id)
	info, ok := c.infos[id]
	return info, c.epoch, ok
}

func (c *cache) putInfo(id string, info JobInfo, tok uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.fresh(id, tok) {
		return
	}
	if c.infos == nil {
		c.infos = map[string]JobInfo{}
	}
	c.infos[id] = info
	c.stamp(id)
}

// clear forgets every entry; fills started before it are not cached.
func (c *cache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	clear(c.dropped)
	c.floor = c.epoch
	for id := range c.born {
		c.forget(id)
	}
	for id := range c.summaries {
		c.forget(id)
	}
	for id := range c.spans {
		c.forget(id)
	}
	for id := range c.infos {
		c.forget(id)
	}
	for id := range c.jobs {
		c.forget(id)
	}
}
