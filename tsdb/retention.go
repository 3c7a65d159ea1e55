package tsdb

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Retention works on whole jobs against the clock: a job whose newest
// sample, task start and last event are all older than Now() - Retention
// is deleted, through Delete's mechanism, and nothing else is. Prometheus's
// own retention (blocks older than the newest block minus the duration)
// is off: there one sample stamped in the far future makes every other
// job look old.

// retentionInterval is how often retention runs: a tenth of the
// retention, at most an hour and at least a second.
func retentionInterval(retention time.Duration) time.Duration {
	return min(max(retention/10, time.Second), time.Hour)
}

// runRetention applies retention every retentionInterval until Close.
func (s *Store) runRetention() {
	defer s.stopped.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	tick := time.NewTicker(retentionInterval(s.retention))
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		ids, err := s.applyRetention(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			s.logger.Error("apply retention", "retention", s.retention, "err", err)
		case len(ids) > 0:
			s.logger.Info("retention deleted jobs", "retention", s.retention, "jobs", len(ids))
		}
	}
}

// applyRetention deletes every job with nothing at or after
// Now() - Retention and returns their ids, sorted.
func (s *Store) applyRetention(ctx context.Context) ([]string, error) {
	cutoffMs := s.now().Add(-s.retention).UnixMilli()
	// Spans (chunk bounds, cached per job) pick the candidates; the exact
	// check under the job's lock decides.
	spans, err := s.Spans(ctx)
	if err != nil {
		return nil, err
	}
	var deleted []string
	for _, sp := range spans {
		id := sp.ID
		if sp.LastMs >= cutoffMs || s.hidden(id) {
			continue
		}
		// Checked again under the job's lock: a write may have come in.
		err := s.hide(ctx, id, func() (bool, error) {
			live, err := s.hasSeries(ctx, id, cutoffMs)
			return !live, err
		})
		switch {
		case err == nil:
			deleted = append(deleted, id)
		case !errors.Is(err, ErrJobNotFound):
			return deleted, fmt.Errorf("delete job %q past retention: %w", id, err)
		}
	}
	if len(deleted) > 0 {
		s.deletes.requestCleanup()
	}
	return deleted, nil
}
