package tsdb

import (
	"container/list"
	"sync"
)

// cache keeps job summaries and whole decoded jobs until the job is
// written or deleted. Jobs are evicted least recently used first once
// their samples pass the budget. A generation counter, bumped by every
// drop, stops an entry computed before a write from being cached after it.
type cache struct {
	mu        sync.Mutex
	gen       uint64
	summaries map[string]Summary
	jobs      map[string]*list.Element // of *cachedJob
	lru       list.List                // front: most recently used
	budget    int                      // samples; < 0: no job cache
	held      int

	spans map[string]Span // of every job listed since it was written (span.go)
}

type cachedJob struct {
	id      string
	job     *Job
	samples int
}

func newCache(budget int) *cache {
	if budget == 0 {
		budget = DefaultCacheSamples
	}
	return &cache{summaries: map[string]Summary{}, jobs: map[string]*list.Element{}, budget: budget}
}

func (c *cache) summary(id string) (Summary, uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.summaries[id]
	return s, c.gen, ok
}

func (c *cache) putSummary(id string, s Summary, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen == c.gen {
		c.summaries[id] = s
	}
}

func (c *cache) job(id string) (*Job, uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.jobs[id]; ok {
		c.lru.MoveToFront(e)
		return e.Value.(*cachedJob).job, c.gen, true
	}
	return nil, c.gen, false
}

func (c *cache) putJob(id string, job *Job, gen uint64) {
	n := 0
	for _, col := range job.Columns {
		n += len(col.Ts)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen || n > c.budget {
		return
	}
	if e, ok := c.jobs[id]; ok {
		c.remove(e)
	}
	c.jobs[id] = c.lru.PushFront(&cachedJob{id: id, job: job, samples: n})
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

func (c *cache) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	delete(c.summaries, id)
	delete(c.spans, id)
	if e, ok := c.jobs[id]; ok {
		c.remove(e)
	}
}
