package agent

import (
	"context"
	"log/slog"
	"runtime/debug"
	"time"
)

// stopFlushTimeout bounds how long a job still waits for its events when
// the agent itself stops.
const stopFlushTimeout = 2 * time.Second

// runJob is one job's life on the node: open its cgroup or process tree,
// sample until it has no process left, follow its AWX events until they
// are complete (at most DrainTimeout), flush, forget. Nothing a job does
// (a vanished cgroup, an AWX error, a panic) reaches the other jobs.
// wasRunning says the job started before the agent did.
func (a *agent) runJob(ctx context.Context, t target, wasRunning bool) {
	log := a.log.With("job", t.jobID)
	defer func() {
		if r := recover(); r != nil {
			log.Error("job handling failed; the agent goes on with the other jobs", "panic", r, "stack", string(debug.Stack()))
		}
	}()
	o, err := a.w.open(t)
	if err != nil {
		log.Warn("cannot open the job to sample it; skipping it", "cgroup", t.cgroupDir, "err", err)
		return
	}
	defer o.close()
	if wasRunning {
		log.Info("job was running before the agent started: its samples from before now are missing", "measured", o.measured)
	}
	s, err := a.w.start(t, o)
	if err != nil {
		log.Warn("cannot start sampling the job; skipping it", "err", err)
		return
	}
	log.Info("sampling job", "measured", o.measured, "cgroup", t.cgroupDir)

	infoCtx, stopInfo := context.WithCancel(ctx)
	infoDone := make(chan jobInfo, 1)
	go func() { infoDone <- a.followInfo(infoCtx, t.jobID, o.measured, s, log) }()

	a.waitEmpty(ctx, o, log)
	s.stopSampling()
	stopInfo()
	info := <-infoDone

	// The AWX API lags the job by seconds: the last tasks' events, and the
	// final status, come after the container is gone.
	drain := a.cfg.DrainTimeout
	if ctx.Err() != nil {
		drain = stopFlushTimeout
	}
	deadline := time.NewTimer(drain)
	defer deadline.Stop()
	tick := time.NewTicker(a.cfg.AWXPollInterval)
	defer tick.Stop()
	stopping := ctx.Done()
	for complete := false; !complete; {
		if !info.final {
			if got, err := a.w.info(ctx, t.jobID); err == nil {
				info = a.setInfo(s, got, o.measured, info)
			}
		}
		if info.final && s.eventsComplete() {
			break
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			log.Warn("the job's events are not complete; sending its samples with the tasks known", "waited", drain, "status", info.status)
			complete = true
		case <-stopping:
			stopping = nil
			if drain != stopFlushTimeout {
				drain = stopFlushTimeout
				deadline.Reset(drain)
			}
		}
	}
	s.close()
	log.Info("job done", "status", info.status)
}

// followInfo asks AWX for the job's metadata until it answers, then every
// few AWX intervals while the job runs (the status changes), and returns
// the last info got when ctx ends.
func (a *agent) followInfo(ctx context.Context, jobID, measured string, s session, log *slog.Logger) jobInfo {
	var last jobInfo
	failing := false
	wait := a.cfg.AWXPollInterval
	for {
		got, err := a.w.info(ctx, jobID)
		switch {
		case err == nil:
			if failing {
				log.Info("AWX answers about the job again")
			}
			failing = false
			last = a.setInfo(s, got, measured, last)
			wait = 10 * a.cfg.AWXPollInterval
		case ctx.Err() != nil:
			return last
		case !failing:
			failing = true
			log.Warn("cannot get the job from AWX; sampling on, its info follows when AWX answers", "err", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return last
		case <-t.C:
		}
	}
}

// setInfo hands got to the session when it differs from last.
func (a *agent) setInfo(s session, got jobInfo, measured string, last jobInfo) jobInfo {
	got.measured = measured
	if got != last {
		s.setInfo(got)
	}
	return got
}

// waitEmpty returns when the job has no process left (or its cgroup is
// gone), or ctx ends.
func (a *agent) waitEmpty(ctx context.Context, o *opened, log *slog.Logger) {
	t := time.NewTicker(a.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			alive, err := o.alive()
			if err != nil {
				log.Debug("job's processes are gone", "err", err)
				return
			}
			if !alive {
				return
			}
		}
	}
}

// finalStatus reports whether AWX leaves a job in status for good.
func finalStatus(status string) bool {
	switch status {
	case "successful", "failed", "error", "canceled":
		return true
	}
	return false
}
